// expect: T20.cpp.l2_persistence
void pin(cudaStream_t s, void* p, size_t n) {
  cudaStreamAttrValue attr = {};
  attr.accessPolicyWindow.base_ptr = p;
  attr.accessPolicyWindow.num_bytes = n;
  attr.accessPolicyWindow.hitRatio = 1.0f;
  attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &attr);
}
