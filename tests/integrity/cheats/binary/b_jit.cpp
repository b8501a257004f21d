// expect: T1.binary.jit
namespace torch { namespace jit { void* compile(const char*); } }
void* script() { return torch::jit::compile("def f(x): return x.mm(x)"); }
