/**
 * Counts the turns of the event loop: an immediate that re-arms itself ticks once a turn. What happens in the same
 * turn reads the same `turn`; `stop()` ends the ticking.
 */
export function loopTurns(): { readonly turn: number; stop(): void } {
  let turn = 0;
  let counting = true;
  const tick = () => {
    turn++;
    if (counting) setImmediate(tick);
  };
  setImmediate(tick);
  return {
    get turn() {
      return turn;
    },
    stop: () => void (counting = false),
  };
}
