// expect: T1.cpp.aten_call
#pragma once
#define FALLBACK(a, b) at::native::mm(a, b)
