// expect: T12.cpp.file_io
#include <fstream>
void save() { std::ofstream out("x"); }
