// expect: T20.binary.l2_persistence
extern "C" int cudaCtxResetPersistingL2Cache();
int reset() { return cudaCtxResetPersistingL2Cache(); }
