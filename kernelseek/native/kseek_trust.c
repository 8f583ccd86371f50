// kseek_trust.c: the run-time side of the trust check (kernelseek/runcheck.py loads it).
//
// What it records, with CUPTI (the profiling interface that ships with every CUDA toolkit):
//  - every module the process loads (resource callback MODULE_LOADED gives the cubin the driver
//    loaded): its SHA-256, and per function (STT_FUNC symbol in a .text.<name> section) the SHA-256
//    of its code with the 16-byte instructions that relocations patch zeroed, so the code compares
//    equal whatever addresses the loader fills in;
//  - every kernel launch (driver and runtime API callbacks whose name has "Launch") made while the
//    calling thread is inside a candidate window (kt_window(1)), and every launch from a thread other
//    than the one that started the monitor: the API, the kernel's name, its CUfunction, the CUmodule
//    it belongs to (cuFuncGetModule) and that module's kernel-name set, hashed (the module's
//    identity among the loaded cubins when two define a kernel of the same name);
//  - on request (kt_activity_start/stop), the activity records of kernels, memcpys and memsets with
//    GPU timestamps: the device time of the calls in between (timing's kernel_ms) and what ran.
// Python compares the recorded code with the cubins embedded in the candidate .so, by hash, never
// by name (a vendor cubin can be loaded under any name).
//
// Build: gcc -O2 -shared -fPIC -I<cuda include> kseek_trust.c -o kseek_trust.so -ldl -lpthread
// libcupti and libcuda are opened at kt_start (no link-time dependency), so the library also loads
// on a machine without a GPU, where kt_function_table (the cubin parser) is tested.
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <elf.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------- SHA-256 (FIPS 180-4) --------
typedef struct { uint32_t h[8]; uint64_t n; uint8_t buf[64]; size_t used; } sha256_t;
static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha_block(sha256_t* s, const uint8_t* p) {
  uint32_t w[64], a[8];
  for (int i = 0; i < 16; ++i) w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  memcpy(a, s->h, sizeof a);
  for (int i = 0; i < 64; ++i) {
    uint32_t t1 = a[7] + (ROR(a[4], 6) ^ ROR(a[4], 11) ^ ROR(a[4], 25)) + ((a[4] & a[5]) ^ (~a[4] & a[6])) + K256[i] + w[i];
    uint32_t t2 = (ROR(a[0], 2) ^ ROR(a[0], 13) ^ ROR(a[0], 22)) + ((a[0] & a[1]) ^ (a[0] & a[2]) ^ (a[1] & a[2]));
    memmove(a + 1, a, 7 * sizeof(uint32_t));
    a[4] += t1;
    a[0] = t1 + t2;
  }
  for (int i = 0; i < 8; ++i) s->h[i] += a[i];
}
static void sha_init(sha256_t* s) {
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, h0, sizeof h0);
  s->n = 0;
  s->used = 0;
}
static void sha_update(sha256_t* s, const void* data, size_t len) {
  const uint8_t* p = (const uint8_t*)data;
  s->n += len;
  while (len) {
    size_t take = 64 - s->used < len ? 64 - s->used : len;
    memcpy(s->buf + s->used, p, take);
    s->used += take, p += take, len -= take;
    if (s->used == 64) sha_block(s, s->buf), s->used = 0;
  }
}
static void sha_hex(sha256_t* s, char out[65]) {
  uint64_t bits = s->n * 8;
  uint8_t pad = 0x80, zero = 0, len[8];
  sha_update(s, &pad, 1);
  while (s->used != 56) sha_update(s, &zero, 1);
  for (int i = 0; i < 8; ++i) len[i] = (uint8_t)(bits >> (56 - 8 * i));
  sha_update(s, len, 8);
  for (int i = 0; i < 8; ++i) sprintf(out + 8 * i, "%08x", s->h[i]);
  out[64] = 0;
}
static void sha_of(const void* p, size_t n, char out[65]) {
  sha256_t s;
  sha_init(&s);
  sha_update(&s, p, n);
  sha_hex(&s, out);
}

// ---------------------------------------------------------------- a growable text buffer ------
typedef struct { char* p; size_t n, cap; } text_t;
static void text_add(text_t* t, const char* fmt, ...) {
  va_list ap;
  for (;;) {
    size_t room = t->cap - t->n;
    va_start(ap, fmt);
    int k = vsnprintf(t->p ? t->p + t->n : NULL, t->p ? room : 0, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if (t->p && (size_t)k < room) { t->n += (size_t)k; return; }
    size_t cap = t->cap ? t->cap : 1 << 16;
    while (cap - t->n <= (size_t)k) cap *= 2;
    char* q = (char*)realloc(t->p, cap);
    if (!q) return;
    t->p = q, t->cap = cap;
  }
}
// Hand the text to the caller (free it with kt_free) and start a new one.
static char* text_take(text_t* t) {
  char* out = t->p ? t->p : strdup("");
  if (t->p) out[t->n] = 0;
  t->p = NULL, t->n = t->cap = 0;
  return out;
}

// ---------------------------------------------------------------- cubin (ELF64) parsing -------
// One line per kernel: "F <code sha256> <code bytes> <st_other> <name>"; the module's own line
// "M <cubin sha256> <bytes> <kernels> <sorted-name-set sha256>" is written by the caller. Kernels are
// the STT_FUNC symbols marked as entries (st_other & STO_ENTRY); subroutines share their kernel's
// .text section, so its hash covers them. A cubin with no entry marks lists every function.
#define STO_ENTRY 0x10
static int cmp_str(const void* a, const void* b) { return strcmp(*(char* const*)a, *(char* const*)b); }

static int parse_cubin(const uint8_t* img, size_t size, text_t* out, char names_sha[65], int* nfunc) {
  *nfunc = 0;
  sha_of("", 0, names_sha);
  if (size < sizeof(Elf64_Ehdr) || memcmp(img, ELFMAG, SELFMAG) || img[EI_CLASS] != ELFCLASS64) return -1;
  const Elf64_Ehdr* eh = (const Elf64_Ehdr*)img;
  if (eh->e_shoff == 0 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
      eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > size || eh->e_shstrndx >= eh->e_shnum) return -2;
  const Elf64_Shdr* sh = (const Elf64_Shdr*)(img + eh->e_shoff);
  const int ns = eh->e_shnum;
  for (int i = 0; i < ns; ++i)
    if (sh[i].sh_type != SHT_NOBITS && sh[i].sh_offset + sh[i].sh_size > size) return -3;
  const char* shstr = (const char*)img + sh[eh->e_shstrndx].sh_offset;
  const size_t shstr_n = sh[eh->e_shstrndx].sh_size;
  const Elf64_Shdr* symtab = NULL;
  for (int i = 0; i < ns; ++i) if (sh[i].sh_type == SHT_SYMTAB) symtab = &sh[i];
  if (!symtab || symtab->sh_link >= (unsigned)ns || symtab->sh_entsize != sizeof(Elf64_Sym)) return 0;
  const char* str = (const char*)img + sh[symtab->sh_link].sh_offset;
  const size_t str_n = sh[symtab->sh_link].sh_size;
  const Elf64_Sym* syms = (const Elf64_Sym*)(img + symtab->sh_offset);
  const size_t nsym = symtab->sh_size / sizeof(Elf64_Sym);
  char** names = (char**)calloc(nsym ? nsym : 1, sizeof(char*));
  int nn = 0, any_entry = 0;
  for (size_t k = 0; k < nsym; ++k)
    if (ELF64_ST_TYPE(syms[k].st_info) == STT_FUNC && (syms[k].st_other & STO_ENTRY)) any_entry = 1;
  for (size_t k = 0; k < nsym; ++k) {
    const Elf64_Sym* s = &syms[k];
    if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_shndx == 0 || s->st_shndx >= ns) continue;
    if (any_entry && !(s->st_other & STO_ENTRY)) continue;
    if (s->st_name >= str_n || sh[s->st_shndx].sh_name >= shstr_n) continue;
    const char* name = str + s->st_name;
    const char* secname = shstr + sh[s->st_shndx].sh_name;
    if (strncmp(secname, ".text.", 6) || !memchr(name, 0, str_n - s->st_name)) continue;
    const Elf64_Shdr* code = &sh[s->st_shndx];
    uint8_t* buf = (uint8_t*)malloc(code->sh_size ? code->sh_size : 1);
    if (!buf) continue;
    memcpy(buf, img + code->sh_offset, code->sh_size);
    for (int r = 0; r < ns; ++r) {        // zero the instructions that relocations patch
      if ((sh[r].sh_type != SHT_REL && sh[r].sh_type != SHT_RELA) || sh[r].sh_info != s->st_shndx) continue;
      const size_t ent = sh[r].sh_type == SHT_REL ? sizeof(Elf64_Rel) : sizeof(Elf64_Rela);
      for (size_t e = 0; e + ent <= sh[r].sh_size; e += ent) {
        uint64_t off = ((const Elf64_Rel*)(img + sh[r].sh_offset + e))->r_offset & ~(uint64_t)15;
        if (off < code->sh_size) memset(buf + off, 0, code->sh_size - off < 16 ? code->sh_size - off : 16);
      }
    }
    char hex[65];
    sha_of(buf, code->sh_size, hex);
    free(buf);
    text_add(out, "F %s %llu %u %s\n", hex, (unsigned long long)code->sh_size, (unsigned)s->st_other, name);
    names[nn++] = (char*)name;
  }
  qsort(names, nn, sizeof(char*), cmp_str);
  sha256_t ss;
  sha_init(&ss);
  for (int i = 0; i < nn; ++i) sha_update(&ss, names[i], strlen(names[i]) + 1);
  sha_hex(&ss, names_sha);
  *nfunc = nn;
  free(names);
  return 0;
}

// The kernels of a loaded image: an ELF cubin, or a fatbin (magic 0xBA55ED50) whose uncompressed
// ELF entries are parsed one by one (their F lines together; the name set covers all of them).
static int parse_image(const uint8_t* img, size_t size, text_t* out, char names_sha[65], int* nfunc) {
  if (size < 16 || *(const uint32_t*)img != 0xBA55ED50u) return parse_cubin(img, size, out, names_sha, nfunc);
  int total = 0, rc = -6;
  size_t off = 0;
  sha256_t all;
  sha_init(&all);
  while (off + 16 <= size && *(const uint32_t*)(img + off) == 0xBA55ED50u) {
    const uint16_t hsize = *(const uint16_t*)(img + off + 6);
    const uint64_t fsize = *(const uint64_t*)(img + off + 8);
    size_t p = off + hsize, end = off + hsize + fsize;
    if (end > size) break;
    while (p + 16 <= end) {
      const uint16_t kind = *(const uint16_t*)(img + p);
      const uint32_t ehs = *(const uint32_t*)(img + p + 4);
      const uint64_t psize = *(const uint64_t*)(img + p + 8);
      if (p + ehs + psize > end) break;
      if (kind == 2 && psize >= 4 && !memcmp(img + p + ehs, ELFMAG, SELFMAG)) {
        char sub[65];
        int n = 0;
        if (parse_cubin(img + p + ehs, psize, out, sub, &n) == 0) rc = 0, total += n, sha_update(&all, sub, 64);
      }
      p += ehs + psize;
    }
    off = (end + 7) & ~(size_t)7;
  }
  sha_hex(&all, names_sha);
  *nfunc = total;
  return rc;
}

// For tests and for Python callers: the kernel table of one cubin or fatbin, as text (free with kt_free).
char* kt_function_table(const void* img, size_t size) {
  text_t t = {0}, body = {0};
  char names_sha[65], cub[65];
  int nf = 0;
  int rc = parse_image((const uint8_t*)img, size, &body, names_sha, &nf);
  sha_of(img, size, cub);
  text_add(&t, "M %s %zu %d %s %d\n", cub, size, nf, names_sha, rc);
  if (body.p) text_add(&t, "%s", body.p);
  free(body.p);
  return text_take(&t);
}
void kt_free(char* p) { free(p); }

// ---------------------------------------------------------------- CUPTI and the driver --------
typedef CUptiResult (*f_subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*);
typedef CUptiResult (*f_enable_cb)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
typedef CUptiResult (*f_cb_name)(CUpti_CallbackDomain, uint32_t, const char**);
typedef CUptiResult (*f_act_kind)(CUpti_ActivityKind);
typedef CUptiResult (*f_act_reg)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
typedef CUptiResult (*f_act_flush)(uint32_t);
typedef CUptiResult (*f_act_next)(uint8_t*, size_t, CUpti_Activity**);
typedef CUresult (*f_func_module)(CUmodule*, CUfunction);
typedef CUresult (*f_func_name)(const char**, CUfunction);
typedef CUresult (*f_mod_count)(unsigned int*, CUmodule);
typedef CUresult (*f_mod_enum)(CUfunction*, unsigned int, CUmodule);
typedef CUresult (*f_kernel_func)(CUfunction*, CUkernel);

static struct {
  f_subscribe subscribe;
  f_enable_cb enable_cb;
  f_cb_name cb_name;
  f_act_kind act_enable, act_disable;
  f_act_reg act_register;
  f_act_flush act_flush;
  f_act_next act_next;
  f_func_module func_module;
  f_func_name func_name;
  f_mod_count mod_count;
  f_mod_enum mod_enum;
  f_kernel_func kernel_func;
} api;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t main_thread;
static int started = 0;
static __thread int in_window = 0;          // this thread is inside a candidate call
static __thread int in_callback = 0;        // re-entrancy guard
static text_t launches, modules, activity;  // pending text for Python, under `mu`
static long n_launches = 0, n_modules = 0;
static CUpti_SubscriberHandle subscriber;
static int launch_cb[2][1024];              // [driver, runtime][cbid]: a launch API

typedef struct { CUmodule m; char sig[65]; unsigned n; } handle_t;
static handle_t* handles = NULL;
static size_t n_handles = 0, cap_handles = 0;

// The sorted kernel-name set of a loaded CUmodule, hashed like parse_cubin's (under `mu`).
static const handle_t* module_identity(CUmodule m) {
  for (size_t i = 0; i < n_handles; ++i) if (handles[i].m == m) return &handles[i];
  if (n_handles == cap_handles) {
    size_t cap = cap_handles ? 2 * cap_handles : 64;
    handle_t* h = (handle_t*)realloc(handles, cap * sizeof(handle_t));
    if (!h) return NULL;
    handles = h, cap_handles = cap;
  }
  handle_t* h = &handles[n_handles];
  memset(h, 0, sizeof *h);
  h->m = m;
  strcpy(h->sig, "-");
  unsigned n = 0;
  if (api.mod_count && api.mod_enum && api.func_name && api.mod_count(&n, m) == CUDA_SUCCESS && n) {
    CUfunction* fs = (CUfunction*)calloc(n, sizeof(CUfunction));
    char** names = (char**)calloc(n, sizeof(char*));
    unsigned got = 0;
    if (fs && names && api.mod_enum(fs, n, m) == CUDA_SUCCESS) {
      for (unsigned i = 0; i < n; ++i) {
        const char* nm = NULL;
        if (api.func_name(&nm, fs[i]) == CUDA_SUCCESS && nm) names[got++] = (char*)nm;
      }
      qsort(names, got, sizeof(char*), cmp_str);
      sha256_t ss;
      sha_init(&ss);
      for (unsigned i = 0; i < got; ++i) sha_update(&ss, names[i], strlen(names[i]) + 1);
      sha_hex(&ss, h->sig);
      h->n = got;
    }
    free(fs);
    free(names);
  }
  ++n_handles;
  return h;
}

static void on_module(const CUpti_ResourceData* rd, CUpti_CallbackId cbid) {
  const CUpti_ModuleResourceData* md = (const CUpti_ModuleResourceData*)rd->resourceDescriptor;
  if (!md) return;
  pthread_mutex_lock(&mu);
  if (cbid == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING) {
    text_add(&modules, "U %u\n", md->moduleId);
  } else if (md->pCubin && md->cubinSize) {
    text_t body = {0};
    char names_sha[65], cub[65];
    int nf = 0;
    int rc = parse_image((const uint8_t*)md->pCubin, md->cubinSize, &body, names_sha, &nf);
    sha_of(md->pCubin, md->cubinSize, cub);
    text_add(&modules, "M %u %s %zu %d %s %d\n", md->moduleId, cub, md->cubinSize, nf, names_sha, rc);
    if (body.p) text_add(&modules, "%s", body.p);
    free(body.p);
    ++n_modules;
  } else {
    text_add(&modules, "M %u - 0 0 - -9\n", md->moduleId);
  }
  pthread_mutex_unlock(&mu);
}

// The CUfunction a driver launch call names (NULL for graphs, host functions and the runtime).
static CUfunction launched_function(CUpti_CallbackId cbid, const void* params) {
  if (!params) return NULL;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunch:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      return *(CUfunction const*)params;                       // the first parameter is the function
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      return ((const struct { const CUlaunchConfig* config; CUfunction f; }*)params)->f;
    default:
      return NULL;
  }
}

static void on_launch(CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const CUpti_CallbackData* cd) {
  const int other = !pthread_equal(pthread_self(), main_thread);
  if (!in_window && !other) return;                            // the harness's own launches
  if (cd->callbackSite != CUPTI_API_EXIT) return;              // after lazy loading, with the result
  CUfunction f = dom == CUPTI_CB_DOMAIN_DRIVER_API ? launched_function(cbid, cd->functionParams) : NULL;
  CUmodule m = NULL;
  const char* fname = NULL;
  if (f) {
    if (api.func_module(&m, f) != CUDA_SUCCESS) {               // a CUkernel passed as a CUfunction?
      CUfunction g = NULL;
      m = NULL;
      if (api.kernel_func && api.kernel_func(&g, (CUkernel)f) == CUDA_SUCCESS && g &&
          api.func_module(&m, g) != CUDA_SUCCESS) m = NULL;
      if (g) f = g;
    }
    if (api.func_name) api.func_name(&fname, f);
  }
  const char* name = cd->symbolName && *cd->symbolName ? cd->symbolName : (fname ? fname : "?");
  int rv = cd->functionReturnValue ? *(const int*)cd->functionReturnValue : -1;
  pthread_mutex_lock(&mu);
  const handle_t* h = m ? module_identity(m) : NULL;
  text_add(&launches, "L %ld %d %d %s %u %s %p %p %s %u %d %u %s\n", n_launches++, in_window, other,
           dom == CUPTI_CB_DOMAIN_DRIVER_API ? "drv" : "rt", (unsigned)cbid, cd->functionName ? cd->functionName : "?",
           (void*)f, (void*)m, h ? h->sig : "-", h ? h->n : 0u, rv, cd->correlationId, name);
  pthread_mutex_unlock(&mu);
}

static void CUPTIAPI callback(void* ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void* data) {
  (void)ud;
  if (in_callback) return;
  in_callback = 1;
  if (dom == CUPTI_CB_DOMAIN_RESOURCE &&
      (cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED || cbid == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING))
    on_module((const CUpti_ResourceData*)data, cbid);
  else if ((dom == CUPTI_CB_DOMAIN_DRIVER_API || dom == CUPTI_CB_DOMAIN_RUNTIME_API) && cbid < 1024 &&
           launch_cb[dom == CUPTI_CB_DOMAIN_RUNTIME_API][cbid])
    on_launch(dom, cbid, (const CUpti_CallbackData*)data);
  in_callback = 0;
}

// ---------------------------------------------------------------- activity (kernel time) ------
static void CUPTIAPI buf_request(uint8_t** buf, size_t* size, size_t* max) {
  *size = 8 << 20;
  *buf = (uint8_t*)aligned_alloc(8, *size);
  *max = 0;
}
static void CUPTIAPI buf_complete(CUcontext ctx, uint32_t stream, uint8_t* buf, size_t size, size_t valid) {
  (void)ctx, (void)stream, (void)size;
  CUpti_Activity* rec = NULL;
  pthread_mutex_lock(&mu);
  while (api.act_next(buf, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const CUpti_ActivityKernel10* k = (const CUpti_ActivityKernel10*)rec;
      text_add(&activity, "K %llu %llu %u %s\n", (unsigned long long)k->start, (unsigned long long)k->end,
               k->correlationId, k->name ? k->name : "?");
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const CUpti_ActivityMemcpy6* c = (const CUpti_ActivityMemcpy6*)rec;
      text_add(&activity, "C %llu %llu %u %llu %u\n", (unsigned long long)c->start, (unsigned long long)c->end,
               c->correlationId, (unsigned long long)c->bytes, (unsigned)c->copyKind);
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const CUpti_ActivityMemset4* s = (const CUpti_ActivityMemset4*)rec;
      text_add(&activity, "S %llu %llu %u %llu\n", (unsigned long long)s->start, (unsigned long long)s->end,
               s->correlationId, (unsigned long long)s->bytes);
    }
  }
  pthread_mutex_unlock(&mu);
  free(buf);
}

static const CUpti_ActivityKind ACT_KINDS[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                               CUPTI_ACTIVITY_KIND_MEMSET};

int kt_activity_start(void) {
  if (!started) return -1;
  for (size_t i = 0; i < sizeof ACT_KINDS / sizeof ACT_KINDS[0]; ++i)
    if (api.act_enable(ACT_KINDS[i]) != CUPTI_SUCCESS) return -2 - (int)i;
  return 0;
}
// Stop recording and hand over the records: "K start_ns end_ns correlation name", "C ... bytes kind",
// "S ... bytes" (GPU timestamps in ns).
char* kt_activity_stop(void) {
  if (!started) return strdup("");
  api.act_flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (size_t i = 0; i < sizeof ACT_KINDS / sizeof ACT_KINDS[0]; ++i) api.act_disable(ACT_KINDS[i]);
  api.act_flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  pthread_mutex_lock(&mu);
  char* out = text_take(&activity);
  pthread_mutex_unlock(&mu);
  return out;
}

// ---------------------------------------------------------------- the API for Python ----------
static void* sym(void* lib, const char* name) { return lib ? dlsym(lib, name) : NULL; }

// Start monitoring this process (call once, before CUDA loads any module). cupti: the libcupti to
// open (the one torch uses, if any). Returns 0, or a negative code with `err` saying why.
int kt_start(const char* cupti, char* err, int errlen) {
  if (started) return 0;
  void* lc = dlopen(cupti, RTLD_NOW | RTLD_GLOBAL);
  void* lu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lc || !lu) {
    snprintf(err, errlen, "cannot open %s: %s", !lc ? cupti : "libcuda.so.1", dlerror());
    return -1;
  }
  api.subscribe = (f_subscribe)sym(lc, "cuptiSubscribe");
  api.enable_cb = (f_enable_cb)sym(lc, "cuptiEnableCallback");
  api.cb_name = (f_cb_name)sym(lc, "cuptiGetCallbackName");
  api.act_enable = (f_act_kind)sym(lc, "cuptiActivityEnable");
  api.act_disable = (f_act_kind)sym(lc, "cuptiActivityDisable");
  api.act_register = (f_act_reg)sym(lc, "cuptiActivityRegisterCallbacks");
  api.act_flush = (f_act_flush)sym(lc, "cuptiActivityFlushAll");
  api.act_next = (f_act_next)sym(lc, "cuptiActivityGetNextRecord");
  api.func_module = (f_func_module)sym(lu, "cuFuncGetModule");
  api.func_name = (f_func_name)sym(lu, "cuFuncGetName");
  api.mod_count = (f_mod_count)sym(lu, "cuModuleGetFunctionCount");
  api.mod_enum = (f_mod_enum)sym(lu, "cuModuleEnumerateFunctions");
  api.kernel_func = (f_kernel_func)sym(lu, "cuKernelGetFunction");
  if (!api.subscribe || !api.enable_cb || !api.cb_name || !api.act_enable || !api.act_register || !api.act_flush ||
      !api.act_next || !api.func_module) {
    snprintf(err, errlen, "%s or libcuda lacks a needed function (CUPTI or driver too old)", cupti);
    return -2;
  }
  main_thread = pthread_self();
  CUptiResult r = api.subscribe(&subscriber, callback, NULL);
  if (r != CUPTI_SUCCESS) {
    snprintf(err, errlen, "cuptiSubscribe failed (%d): another CUPTI client (a profiler) holds this process", (int)r);
    return -3;
  }
  int enabled = 0;
  const CUpti_CallbackDomain doms[2] = {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_RUNTIME_API};
  const int sizes[2] = {CUPTI_DRIVER_TRACE_CBID_SIZE, CUPTI_RUNTIME_TRACE_CBID_SIZE};
  for (int d = 0; d < 2; ++d)
    for (int id = 1; id < sizes[d] && id < 1024; ++id) {
      const char* nm = NULL;
      if (api.cb_name(doms[d], (uint32_t)id, &nm) != CUPTI_SUCCESS || !nm || !strstr(nm, "Launch")) continue;
      if (strstr(nm, "Attribute") || strstr(nm, "Occupancy") || strstr(nm, "Config")) continue;
      if (api.enable_cb(1, subscriber, doms[d], (CUpti_CallbackId)id) == CUPTI_SUCCESS) launch_cb[d][id] = 1, ++enabled;
    }
  if (api.enable_cb(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED) != CUPTI_SUCCESS ||
      api.enable_cb(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING) != CUPTI_SUCCESS ||
      enabled < 4) {
    snprintf(err, errlen, "could not enable the module and launch callbacks (%d launch APIs)", enabled);
    return -4;
  }
  if (api.act_register(buf_request, buf_complete) != CUPTI_SUCCESS) {
    snprintf(err, errlen, "cuptiActivityRegisterCallbacks failed");
    return -5;
  }
  started = 1;
  snprintf(err, errlen, "%d launch APIs watched", enabled);
  return 0;
}

void kt_window(int on) { in_window = on; }                  // this thread enters/leaves a candidate call
int kt_started(void) { return started; }

// The launch lines recorded since the last call:
// "L seq in_window other_thread drv|rt cbid api function module module_sig n_kernels ret correlation name"
char* kt_take_launches(void) {
  pthread_mutex_lock(&mu);
  char* out = text_take(&launches);
  pthread_mutex_unlock(&mu);
  return out;
}
// The module lines recorded since the last call: "M id cubin_sha bytes n_functions name_set_sha rc",
// then its "F code_sha bytes st_other name" lines; "U id" when a module is unloaded.
char* kt_take_modules(void) {
  pthread_mutex_lock(&mu);
  char* out = text_take(&modules);
  pthread_mutex_unlock(&mu);
  return out;
}
