// The browser page of page.h: the program as a JSON object and a small WebGPU driver in JavaScript
// (the same steps as webgpu_api.cpp: explicit bind group layouts, one compute pass, the 2-D split
// of large grids, MAP_READ staging copies).
#include "backends/webgpu/page.h"

#include <sstream>

namespace rlx::gpu {

namespace {

std::string base64(const std::string& in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    out += k[v >> 18], out += k[(v >> 12) & 63], out += k[(v >> 6) & 63], out += k[v & 63];
  }
  if (i + 1 == in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    out += k[v >> 18], out += k[(v >> 12) & 63], out += "==";
  } else if (i + 2 == in.size()) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += k[v >> 18], out += k[(v >> 12) & 63], out += k[(v >> 6) & 63], out += '=';
  }
  return out;
}

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (c == '\n') o += "\\n";
    else if (c == '<') o += "\\u003c";  // never "</script>" inside the page's script
    else o += c;
  }
  return o + "\"";
}

const char* kDriver = R"JS(
const B64 = s => Uint8Array.from(atob(s), c => c.charCodeAt(0));
const toB64 = u8 => { let s = ''; for (let i = 0; i < u8.length; i += 8192) s += String.fromCharCode.apply(null, u8.subarray(i, i + 8192)); return btoa(s); };
const show = t => { document.getElementById('out').textContent += t + '\n'; };
async function run() {
  if (!navigator.gpu) throw new Error('this browser has no WebGPU (navigator.gpu)');
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) throw new Error('requestAdapter returned null');
  const L = adapter.limits;
  const device = await adapter.requestDevice({requiredLimits: {
    maxStorageBuffersPerShaderStage: L.maxStorageBuffersPerShaderStage,
    maxComputeWorkgroupStorageSize: L.maxComputeWorkgroupStorageSize,
    maxStorageBufferBindingSize: L.maxStorageBufferBindingSize, maxBufferSize: L.maxBufferSize}});
  device.pushErrorScope('validation');
  const U = GPUBufferUsage;
  const bufs = M.buffers.map(b => device.createBuffer({size: b.size, usage: U.STORAGE | U.COPY_SRC | U.COPY_DST}));
  M.buffers.forEach((b, i) => { if (b.init) device.queue.writeBuffer(bufs[i], 0, B64(b.init)); });
  const pipes = M.kernels.map(k => {
    const module = device.createShaderModule({code: k.wgsl});
    const bgl = device.createBindGroupLayout({entries: k.written.map((w, i) => (
      {binding: i, visibility: GPUShaderStage.COMPUTE, buffer: {type: w ? 'storage' : 'read-only-storage'}}))});
    const pipe = device.createComputePipeline({layout: device.createPipelineLayout({bindGroupLayouts: [bgl]}),
                                               compute: {module, entryPoint: 'main'}});
    return {pipe, bgl};
  });
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  for (const l of M.launches) {
    const p = pipes[l.kernel];
    pass.setPipeline(p.pipe);
    pass.setBindGroup(0, device.createBindGroup({layout: p.bgl,
      entries: l.bufs.map((b, i) => ({binding: i, resource: {buffer: bufs[b]}}))}));
    const gx = Math.min(l.groups, 65535);
    pass.dispatchWorkgroups(gx, Math.ceil(l.groups / gx));
  }
  pass.end();
  const staging = M.outputs.map(o => {
    const s = device.createBuffer({size: Math.ceil(o.bytes / 4) * 4, usage: U.MAP_READ | U.COPY_DST});
    enc.copyBufferToBuffer(bufs[o.buf], 0, s, 0, s.size);
    return s;
  });
  const t0 = performance.now();
  device.queue.submit([enc.finish()]);
  const err = await device.popErrorScope();
  if (err) throw new Error(err.message);
  for (let i = 0; i < staging.length; ++i) {
    await staging[i].mapAsync(GPUMapMode.READ);
    const u8 = new Uint8Array(staging[i].getMappedRange().slice(0, M.outputs[i].bytes));
    console.log('rlx-output ' + i + ' ' + toB64(u8));
    const o = M.outputs[i];
    const v = o.what.startsWith('f32') ? Array.from(new Float32Array(u8.buffer).slice(0, 16)).map(x => x.toPrecision(6))
                                       : Array.from(u8.slice(0, 16));
    show('output ' + i + ' ' + o.what + ': ' + v.join(', ') + (u8.length > 64 ? ', ...' : ''));
  }
  show('ran in ' + (performance.now() - t0).toFixed(1) + ' ms on ' + JSON.stringify(adapter.info || {}));
  console.log('rlx-done');
}
run().catch(e => { console.log('rlx-error ' + e.message); show('error: ' + e.message); });
)JS";

}  // namespace

std::string webgpu_page(const std::string& title, const std::vector<PageBuffer>& buffers,
                        const std::vector<PageKernel>& kernels, const std::vector<PageLaunch>& launches,
                        const std::vector<PageOutput>& outputs) {
  std::ostringstream js;
  js << "const M = {\"buffers\": [";
  for (size_t i = 0; i < buffers.size(); ++i) {
    std::string init = buffers[i].init;
    if (!init.empty()) init.resize((init.size() + 3) / 4 * 4, '\0');  // writeBuffer takes whole words
    js << (i ? ", " : "") << "{\"size\": " << (buffers[i].bytes + 3) / 4 * 4 << ", \"init\": " << json_string(base64(init))
       << "}";
  }
  js << "],\n\"kernels\": [";
  for (size_t i = 0; i < kernels.size(); ++i) {
    js << (i ? ",\n" : "") << "{\"wgsl\": " << json_string(kernels[i].wgsl) << ", \"written\": [";
    for (size_t j = 0; j < kernels[i].written.size(); ++j) js << (j ? ", " : "") << (kernels[i].written[j] ? "true" : "false");
    js << "]}";
  }
  js << "],\n\"launches\": [";
  for (size_t i = 0; i < launches.size(); ++i) {
    js << (i ? ", " : "") << "{\"kernel\": " << launches[i].kernel << ", \"groups\": " << launches[i].groups << ", \"bufs\": [";
    for (size_t j = 0; j < launches[i].bufs.size(); ++j) js << (j ? ", " : "") << launches[i].bufs[j];
    js << "]}";
  }
  js << "],\n\"outputs\": [";
  for (size_t i = 0; i < outputs.size(); ++i)
    js << (i ? ", " : "") << "{\"buf\": " << outputs[i].buf << ", \"bytes\": " << outputs[i].bytes
       << ", \"what\": " << json_string(outputs[i].what) << "}";
  js << "]};\n";
  return "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>" + title +
         "</title></head>\n<body><h3>RLX on WebGPU: " + title + "</h3><pre id=\"out\"></pre>\n<script>\n" + js.str() +
         kDriver + "</script></body></html>\n";
}

}  // namespace rlx::gpu
