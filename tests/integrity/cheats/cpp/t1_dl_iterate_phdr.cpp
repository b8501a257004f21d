// expect: T1.cpp.dynamic_loading
#include <cstddef>
struct dl_phdr_info;
extern "C" int dl_iterate_phdr(int (*cb)(dl_phdr_info*, size_t, void*), void* data);
static int visit(dl_phdr_info*, size_t, void*) { return 0; }
void find_symbols() { dl_iterate_phdr(visit, nullptr); }
