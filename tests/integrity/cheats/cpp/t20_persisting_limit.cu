// expect: T20.cpp.l2_persistence
void reserve() { cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 40 << 20); }
