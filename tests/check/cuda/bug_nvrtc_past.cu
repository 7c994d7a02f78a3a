// Planted bug: ok_nvrtc's run-time compiled kernel reading and writing one
// element past both of its 4000-byte arrays (a native run does not fault).
#define NVRTC_OVER 1
#include "ok_nvrtc.cu"
