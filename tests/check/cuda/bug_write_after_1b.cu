// Planted bug: writes the byte just past the end of a 4096-byte allocation.
#include "planted.h"
__global__ void write_after(char *p, int n) { p[n] = 7; }
int main()
{
    char *p;
    CK(cudaMalloc(&p, 4096)); CK(cudaMemset(p, 1, 4096));
    write_after<<<1, 1>>>(p, 4096);
    return planted_finish("write_after_1b");
}
