// expect: T1.binary.dispatcher
namespace c10 { struct Dispatcher { static Dispatcher& realSingleton(); void* findSchemaOrThrow(const char*, const char*); }; }
void* lookup() { return c10::Dispatcher::realSingleton().findSchemaOrThrow("aten::mm", ""); }
