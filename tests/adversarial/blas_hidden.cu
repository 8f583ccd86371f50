// TRICK: calls the vendor BLAS library that the harness process already has mapped (torch links it),
// leaving nothing for a static check to see: no dlopen/dlsym import, no DT_NEEDED entry, no library
// or function name in any string (the names are stored XOR-ed and decoded at run time). It finds
// the library by reading /proc/self/maps, reads that file's dynamic symbol table by hand to get the
// addresses of the create, set-stream and SGEMM entry points, and on every call runs one 256^3
// SGEMM on the caller's stream before computing the attention honestly. (A kernel could hide its
// real work the same way; the SGEMM stands for it.)
// EXPECT: status=refused, reason contains "host-code gate|run-time check"
// Caught by: the host-code gate (kernelseek/host_gate.py) first: reading /proc/self/maps and the
// library file takes open/fopen/mmap, which it refuses. Behind it, the run-time check
// (kernelseek/runcheck.py): the SGEMM's kernel is launched inside the candidate's call and its code
// is in no cubin of the candidate binary (results_h200.json recorded that verdict before the gate).
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "honest_core.cuh"

namespace {
constexpr unsigned char kKey = 0x5a;
// "libcublas.so", "libcublasLt", "cublasCreate_v2", "cublasSetStream_v2", "cublasSgemm_v2", each ^ 0x5a
const unsigned char kLib[] = {0x36, 0x33, 0x38, 0x39, 0x2f, 0x38, 0x36, 0x3b, 0x29, 0x74, 0x29, 0x35, 0};
const unsigned char kLt[] = {0x36, 0x33, 0x38, 0x39, 0x2f, 0x38, 0x36, 0x3b, 0x29, 0x16, 0x2e, 0};
const unsigned char kCreate[] = {0x39, 0x2f, 0x38, 0x36, 0x3b, 0x29, 0x19, 0x28, 0x3f, 0x3b, 0x2e, 0x3f, 0x05, 0x2c, 0x68, 0};
const unsigned char kStream[] = {0x39, 0x2f, 0x38, 0x36, 0x3b, 0x29, 0x09, 0x3f, 0x2e, 0x09, 0x2e, 0x28, 0x3f, 0x3b, 0x37,
                                 0x05, 0x2c, 0x68, 0};
const unsigned char kSgemm[] = {0x39, 0x2f, 0x38, 0x36, 0x3b, 0x29, 0x09, 0x3d, 0x3f, 0x37, 0x37, 0x05, 0x2c, 0x68, 0};

void decode(const unsigned char* in, char* out) {
  int i = 0;
  for (; in[i]; ++i) out[i] = (char)(in[i] ^ kKey);
  out[i] = 0;
}

typedef int (*create_fn)(void**);
typedef int (*stream_fn)(void*, cudaStream_t);
typedef int (*sgemm_fn)(void*, int, int, int, int, int, const float*, const float*, int, const float*, int,
                        const float*, float*, int);
create_fn create_ = nullptr;
stream_fn set_stream_ = nullptr;
sgemm_fn sgemm_ = nullptr;
void* handle_ = nullptr;
float* buf_ = nullptr;
bool tried_ = false;
constexpr int kN = 256;

// The load address and path of the first mapping of a file whose name has `want` but not `avoid`.
bool find_mapping(const char* want, const char* avoid, unsigned long* base, char* path, size_t n) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return false;
  char line[4096];
  bool ok = false;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi, off;
    char perms[8], file[4000] = "";
    if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %3999s", &lo, &hi, perms, &off, file) < 4) continue;
    if (!strstr(file, want) || strstr(file, avoid) || off != 0) continue;
    *base = lo;
    strncpy(path, file, n - 1);
    ok = true;
    break;
  }
  fclose(f);
  return ok;
}

// st_value of a dynamic symbol, read from the file's section headers (.dynsym / .dynstr).
unsigned long dynamic_symbol(const char* path, const char* name) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  struct stat st;
  fstat(fd, &st);
  void* m = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return 0;
  const unsigned char* img = (const unsigned char*)m;
  const Elf64_Ehdr* eh = (const Elf64_Ehdr*)img;
  const Elf64_Shdr* sh = (const Elf64_Shdr*)(img + eh->e_shoff);
  unsigned long value = 0;
  for (int i = 0; i < eh->e_shnum && !value; ++i) {
    if (sh[i].sh_type != SHT_DYNSYM) continue;
    const Elf64_Sym* sym = (const Elf64_Sym*)(img + sh[i].sh_offset);
    const char* str = (const char*)img + sh[sh[i].sh_link].sh_offset;
    for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); ++k)
      if (sym[k].st_value && !strcmp(str + sym[k].st_name, name)) { value = sym[k].st_value; break; }
  }
  munmap(m, st.st_size);
  return value;
}

void find_blas() {
  tried_ = true;
  char lib[32], lt[32], create[32], stream[32], sgemm[32], path[4000] = "";
  decode(kLib, lib), decode(kLt, lt), decode(kCreate, create), decode(kStream, stream), decode(kSgemm, sgemm);
  unsigned long base = 0;
  if (!find_mapping(lib, lt, &base, path, sizeof path)) return;
  const unsigned long c = dynamic_symbol(path, create), s = dynamic_symbol(path, stream), g = dynamic_symbol(path, sgemm);
  if (!c || !s || !g) return;
  create_ = (create_fn)(base + c), set_stream_ = (stream_fn)(base + s), sgemm_ = (sgemm_fn)(base + g);
  if (create_(&handle_) != 0 || cudaMalloc(&buf_, 3 * kN * kN * sizeof(float)) != cudaSuccess) handle_ = nullptr;
}
}  // namespace

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  if (!tried_) find_blas();
  if (handle_) {
    const float one = 1.f, zero = 0.f;
    set_stream_(handle_, stream);
    sgemm_(handle_, 0, 0, kN, kN, kN, &one, buf_, kN, buf_ + kN * kN, kN, &zero, buf_ + 2 * kN * kN, kN);
  }
  return hc::launch(p, stream);
}

extern "C" const char* kseek_name(void) { return "adv_blas_hidden"; }
