import type { PolicyModel } from "../suite.js";
import { runPolicyModels } from "./runPolicies.js";
import { threadPolicyModels } from "./threadPolicies.js";

export const models: PolicyModel[] = [...runPolicyModels, ...threadPolicyModels];
