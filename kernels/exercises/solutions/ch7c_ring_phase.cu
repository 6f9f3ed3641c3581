// SOLUTION of exercise ch7c/ring_phase (a variation of hgemm/08_wgmma.cu): the lines that fill the gap of ../ch7c_ring_phase.cu.
// Try the exercise first: python -m gemmlab exercise check ch7c/ring_phase
// ---- EXERCISE: advance the consumer's (stage, phase) ----
// Advance to the next tile's stage: the ring wraps after NUM_STAGES tiles, and each wrap
// starts a new round of every full[s], whose completed phase has the other parity.
if (++s == NUM_STAGES) {
    s = 0;
    phase ^= 1;
}
// ---- END ----
