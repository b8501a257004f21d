// expect: T23.binary.system_call
#include <sys/socket.h>
int net() { return socket(AF_INET, SOCK_STREAM, 0); }
