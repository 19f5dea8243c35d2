// `opengl`: GLSL 4.50 compute through EGL with no window (EGL_PLATFORM_SURFACELESS_MESA, falling
// back to the default display), SSBOs for every buffer. libEGL.so.1 is dlopen'ed and every GL
// entry point comes from eglGetProcAddress, so nothing links against GL.
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GL/glcorearb.h>
#include <dlfcn.h>

#include <cstdlib>
#include <map>

#include "backends/portable/api.h"
#include "runtime/disk_cache.h"  // fnv1a64

namespace rlx::gpu {

namespace {

#define RLX_GL_LIST(X)                                                                                                \
  X(PFNGLGETSTRINGPROC, glGetString) X(PFNGLCREATESHADERPROC, glCreateShader)                                         \
  X(PFNGLSHADERSOURCEPROC, glShaderSource) X(PFNGLCOMPILESHADERPROC, glCompileShader)                                 \
  X(PFNGLGETSHADERIVPROC, glGetShaderiv) X(PFNGLGETSHADERINFOLOGPROC, glGetShaderInfoLog)                             \
  X(PFNGLCREATEPROGRAMPROC, glCreateProgram) X(PFNGLATTACHSHADERPROC, glAttachShader)                                 \
  X(PFNGLLINKPROGRAMPROC, glLinkProgram) X(PFNGLGETPROGRAMIVPROC, glGetProgramiv)                                     \
  X(PFNGLGETPROGRAMINFOLOGPROC, glGetProgramInfoLog) X(PFNGLDELETESHADERPROC, glDeleteShader)                         \
  X(PFNGLGENBUFFERSPROC, glGenBuffers) X(PFNGLDELETEBUFFERSPROC, glDeleteBuffers)                                     \
  X(PFNGLBINDBUFFERPROC, glBindBuffer) X(PFNGLBUFFERDATAPROC, glBufferData)                                           \
  X(PFNGLBUFFERSUBDATAPROC, glBufferSubData) X(PFNGLGETBUFFERSUBDATAPROC, glGetBufferSubData)                         \
  X(PFNGLBINDBUFFERBASEPROC, glBindBufferBase) X(PFNGLUSEPROGRAMPROC, glUseProgram)                                   \
  X(PFNGLDISPATCHCOMPUTEPROC, glDispatchCompute) X(PFNGLMEMORYBARRIERPROC, glMemoryBarrier)                           \
  X(PFNGLFINISHPROC, glFinish) X(PFNGLGETERRORPROC, glGetError)

class GlApi : public Api {
 public:
#define RLX_GLF(T, n) T n = nullptr;
  RLX_GL_LIST(RLX_GLF)
#undef RLX_GLF
  PFNEGLMAKECURRENTPROC make_current = nullptr;
  PFNEGLGETCURRENTCONTEXTPROC get_current = nullptr;
  EGLDisplay dpy = EGL_NO_DISPLAY;
  EGLContext ctx = EGL_NO_CONTEXT;
  std::string desc;
  std::unique_ptr<codegen::CLikeRenderer> r = codegen::make_glsl_renderer();
  std::map<uint64_t, int> prog_cache;
  std::vector<GLuint> progs;
  std::map<int, std::vector<Launch>> recs;
  std::map<int, size_t> sizes;
  int next_rec = 0;

  void current() {  // GL contexts are per thread; re-bind if another thread last used it
    if (get_current() != ctx) make_current(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, ctx);
  }
  void check(const char* what) {
    GLenum e = glGetError();
    if (e != GL_NO_ERROR) fail("[opengl] ", what, " failed (GL error 0x", std::hex, e, ")");
  }
  std::string name() const override { return "opengl"; }
  std::string device() const override { return desc; }
  const codegen::CLikeRenderer& renderer() const override { return *r; }

  int buffer(size_t bytes) override {
    current();
    GLuint b;
    glGenBuffers(1, &b);
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, b);
    std::vector<char> zero(bytes, 0);
    glBufferData(GL_SHADER_STORAGE_BUFFER, static_cast<GLsizeiptr>(bytes), zero.data(), GL_DYNAMIC_COPY);
    check("glBufferData");
    sizes[static_cast<int>(b)] = bytes;
    return static_cast<int>(b);
  }
  void free_buffer(int b) override {
    current();
    GLuint x = static_cast<GLuint>(b);
    glDeleteBuffers(1, &x);
    sizes.erase(b);
  }
  void upload(int b, const void* src, size_t n) override {
    current();
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, static_cast<GLuint>(b));
    glBufferSubData(GL_SHADER_STORAGE_BUFFER, 0, static_cast<GLsizeiptr>(n), src);
    check("glBufferSubData");
  }
  void download(int b, void* dst, size_t n) override {
    current();
    glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, static_cast<GLuint>(b));
    glGetBufferSubData(GL_SHADER_STORAGE_BUFFER, 0, static_cast<GLsizeiptr>(n), dst);
    check("glGetBufferSubData");
  }
  int program(const codegen::RenderedKernel& k) override {
    uint64_t h = fnv1a64(k.source);
    if (auto it = prog_cache.find(h); it != prog_cache.end()) return it->second;
    current();
    GLuint sh = glCreateShader(GL_COMPUTE_SHADER);
    const char* src = k.source.c_str();
    glShaderSource(sh, 1, &src, nullptr);
    glCompileShader(sh);
    GLint ok = 0;
    char log[4096] = {0};
    glGetShaderiv(sh, GL_COMPILE_STATUS, &ok);
    if (!ok) {
      glGetShaderInfoLog(sh, sizeof log, nullptr, log);
      fail("[opengl] GLSL compile of ", k.name, " failed:\n", log, "\n--- source ---\n", k.source);
    }
    GLuint p = glCreateProgram();
    glAttachShader(p, sh);
    glLinkProgram(p);
    glDeleteShader(sh);
    glGetProgramiv(p, GL_LINK_STATUS, &ok);
    if (!ok) {
      glGetProgramInfoLog(p, sizeof log, nullptr, log);
      fail("[opengl] link of ", k.name, " failed: ", log);
    }
    progs.push_back(p);
    return prog_cache[h] = static_cast<int>(progs.size() - 1);
  }
  int record(const std::vector<Launch>& l) override {
    recs[next_rec] = l;
    return next_rec++;
  }
  void free_recording(int rec) override { recs.erase(rec); }
  void submit(int rec) override {
    current();
    for (auto& l : recs.at(rec)) {
      glUseProgram(progs.at(static_cast<size_t>(l.prog)));
      for (size_t i = 0; i < l.bufs.size(); ++i)
        glBindBufferBase(GL_SHADER_STORAGE_BUFFER, static_cast<GLuint>(i), static_cast<GLuint>(l.bufs[i]));
      GLuint gx = static_cast<GLuint>(std::min<int64_t>(l.groups, 65535));
      GLuint gy = static_cast<GLuint>((l.groups + gx - 1) / gx);
      glDispatchCompute(gx, gy, 1);
      glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT | GL_BUFFER_UPDATE_BARRIER_BIT);
    }
    glFinish();
    check("glDispatchCompute");
  }
};

}  // namespace

std::unique_ptr<Api> make_opengl_api(std::string* why) {
  void* h = dlopen("libEGL.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    *why = "no driver: libEGL.so.1 not found (apt install libegl1 libegl-mesa0 libgl1-mesa-dri)";
    return nullptr;
  }
  auto gpa = reinterpret_cast<PFNEGLGETPROCADDRESSPROC>(dlsym(h, "eglGetProcAddress"));
  if (!gpa) {
    *why = "no driver: libEGL.so.1 lacks eglGetProcAddress";
    return nullptr;
  }
  auto egl = [&](const char* n) {
    void* p = dlsym(h, n);
    return p ? p : reinterpret_cast<void*>(gpa(n));
  };
  auto get_platform_display = reinterpret_cast<PFNEGLGETPLATFORMDISPLAYEXTPROC>(egl("eglGetPlatformDisplayEXT"));
  auto get_display = reinterpret_cast<PFNEGLGETDISPLAYPROC>(egl("eglGetDisplay"));
  auto initialize = reinterpret_cast<PFNEGLINITIALIZEPROC>(egl("eglInitialize"));
  auto bind_api = reinterpret_cast<PFNEGLBINDAPIPROC>(egl("eglBindAPI"));
  auto choose = reinterpret_cast<PFNEGLCHOOSECONFIGPROC>(egl("eglChooseConfig"));
  auto create = reinterpret_cast<PFNEGLCREATECONTEXTPROC>(egl("eglCreateContext"));
  auto a = std::make_unique<GlApi>();
  a->make_current = reinterpret_cast<PFNEGLMAKECURRENTPROC>(egl("eglMakeCurrent"));
  a->get_current = reinterpret_cast<PFNEGLGETCURRENTCONTEXTPROC>(egl("eglGetCurrentContext"));
  if (!initialize || !bind_api || !create || !a->make_current || !a->get_current || !choose) {
    *why = "no driver: libEGL.so.1 lacks core EGL entry points";
    return nullptr;
  }
  EGLDisplay dpy = EGL_NO_DISPLAY;
  if (get_platform_display) dpy = get_platform_display(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
  EGLint maj = 0, min = 0;
  if (dpy == EGL_NO_DISPLAY || !initialize(dpy, &maj, &min)) {
    dpy = get_display ? get_display(EGL_DEFAULT_DISPLAY) : EGL_NO_DISPLAY;
    if (dpy == EGL_NO_DISPLAY || !initialize(dpy, &maj, &min)) {
      *why = "no hardware: EGL found no display (no GL driver: apt install libegl-mesa0 libgl1-mesa-dri)";
      return nullptr;
    }
  }
  bind_api(EGL_OPENGL_API);
  EGLint cfg_attr[] = {EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT, EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_NONE};
  EGLConfig cfg = nullptr;
  EGLint ncfg = 0;
  choose(dpy, cfg_attr, &cfg, 1, &ncfg);
  EGLint ctx_attr[] = {EGL_CONTEXT_MAJOR_VERSION, 4, EGL_CONTEXT_MINOR_VERSION, 5, EGL_CONTEXT_OPENGL_PROFILE_MASK,
                       EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT, EGL_NONE};
  EGLContext ctx = create(dpy, ncfg ? cfg : EGL_NO_CONFIG_KHR, EGL_NO_CONTEXT, ctx_attr);
  if (ctx == EGL_NO_CONTEXT || !a->make_current(dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, ctx)) {
    *why = "no hardware: no OpenGL 4.5 core context without a surface on this EGL display";
    return nullptr;
  }
  a->dpy = dpy;
  a->ctx = ctx;
#define RLX_GLF(T, n)                                           \
  a->n = reinterpret_cast<T>(gpa(#n));                          \
  if (!a->n) {                                                  \
    *why = "no driver: GL entry point " #n " not available";    \
    return nullptr;                                             \
  }
  RLX_GL_LIST(RLX_GLF)
#undef RLX_GLF
  const char* ver = reinterpret_cast<const char*>(a->glGetString(GL_VERSION));
  const char* ren = reinterpret_cast<const char*>(a->glGetString(GL_RENDERER));
  a->desc = std::string(ren ? ren : "?") + ", GL " + (ver ? ver : "?");
  std::string rs = ren ? ren : "";
  choose_gemm(*a->r, rs.find("llvmpipe") != std::string::npos || rs.find("softpipe") != std::string::npos ||
                         rs.find("SwiftShader") != std::string::npos);
  // Device features from the extension list (reported; the GLSL kernels need none of them).
  auto get_int = reinterpret_cast<PFNGLGETINTEGERVPROC>(gpa("glGetIntegerv"));
  auto get_stri = reinterpret_cast<PFNGLGETSTRINGIPROC>(gpa("glGetStringi"));
  if (get_int && get_stri) {
    GLint n = 0;
    get_int(GL_NUM_EXTENSIONS, &n);
    std::string exts = " ";
    for (GLint i = 0; i < n; ++i)
      if (auto e = reinterpret_cast<const char*>(get_stri(GL_EXTENSIONS, static_cast<GLuint>(i)))) exts += std::string(e) + " ";
    auto has = [&](const char* e) { return exts.find(std::string(" ") + e + " ") != std::string::npos; };
    a->features.fp64 = has("GL_ARB_gpu_shader_fp64") || (ver && std::atof(ver) >= 4.0);  // core since GL 4.0
    a->features.int64 = has("GL_ARB_gpu_shader_int64");
    a->features.fp16 = has("GL_AMD_gpu_shader_half_float") || has("GL_NV_gpu_shader5");
    a->features.int8 = has("GL_NV_gpu_shader5") || has("GL_EXT_shader_explicit_arithmetic_types_int8");
    a->features.subgroup_size = 0;
    if (has("GL_KHR_shader_subgroup")) {
      GLint sz = 0;
      get_int(0x9532 /* GL_SUBGROUP_SIZE_KHR */, &sz);
      a->features.subgroup_size = sz > 0 ? sz : -1;
      while (a->glGetError() != GL_NO_ERROR) {}
    }
  }
  return a;
}

}  // namespace rlx::gpu
