// Planted bug: writes the byte just before the start of an allocation.
#include "planted.h"
__global__ void write_before(char *p) { p[-1] = 7; }
int main()
{
    char *p;
    CK(cudaMalloc(&p, 4096)); CK(cudaMemset(p, 1, 4096));
    write_before<<<1, 1>>>(p);
    return planted_finish("write_before");
}
