import type { PolicyModel } from "../suite.js";
import { runPolicyModels } from "./runPolicies.js";

export const models: PolicyModel[] = [...runPolicyModels];
