// resources.cpp — what nvcc says each kernel of kernels/ takes of a GPU
// (tools/kernel_resources.py at build time: its launch bound, registers and
// static shared memory for sm_90), found by the kernel's mangled name, which
// the host compiler gives the emulated kernel too (the Itanium ABI's, as
// nvcc's host side). A launch is then held to what a GPU would refuse: more
// threads than the kernel's __launch_bounds__, or more registers than a
// multiprocessor has; cudaFuncGetAttributes reports the real static shared
// size. A kernel outside the table (a test's own) keeps the emulator's
// bounds.
#include <dlfcn.h>
#include <string.h>

#include "emu.h"

namespace emu {

namespace {
const kernel_resources table[] = {
#ifdef SEAM_EMU_KERNEL_RESOURCES
#include "kernel_resources.inc"
#endif
    {nullptr, 0, 0, 0},
};
}  // namespace

const kernel_resources *resources_of(const void *fn) {
    Dl_info info;
    if (!dladdr(fn, &info) || !info.dli_sname) return nullptr;
    for (const kernel_resources *k = table; k->name; k++)
        if (!strcmp(k->name, info.dli_sname)) return k;
    return nullptr;
}

bool resources_known() { return table[0].name != nullptr; }

size_t static_shared_of(const void *fn) {
    const kernel_resources *k = resources_of(fn);
    return k ? (size_t)k->static_shared : STATIC_SHARED_BOUND;
}

}  // namespace emu
