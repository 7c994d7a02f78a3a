// A Dawn (WebGPU, npm "webgpu") compute workload for scripts/bench-realapps.sh:
// 10 dispatches over 4 MiB with write-buffer uploads and map-read readbacks,
// printing a digest. The GPU, adapter and device objects are kept alive on
// globalThis: a Dawn instance the garbage collector frees while its events
// are still processed crashes (futex errors, SIGSEGV) with or without a
// capture layer.
import { create, globals } from 'webgpu';
Object.assign(globalThis, globals);
const gpu = create([]); globalThis.keepGpu = gpu;
const adapter = await gpu.requestAdapter(); globalThis.keepAdapter = adapter;
if (!adapter) { console.log("no adapter"); process.exit(3); }
const info = adapter.info;
console.log("adapter", info.vendor, info.architecture, info.description);
const device = await adapter.requestDevice(); globalThis.keepDevice = device;
const N = 1 << 20;
const data = new Uint32Array(N); for (let i = 0; i < N; i++) data[i] = (i * 2654435761) >>> 0;
const buf = device.createBuffer({size: N*4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST});
device.queue.writeBuffer(buf, 0, data);
const mod = device.createShaderModule({code: `@group(0) @binding(0) var<storage, read_write> a: array<u32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3u) { a[id.x] = a[id.x] * 3u + 7u; }`});
const pipe = device.createComputePipeline({layout: 'auto', compute: {module: mod, entryPoint: 'main'}});
const bg = device.createBindGroup({layout: pipe.getBindGroupLayout(0), entries: [{binding: 0, resource: {buffer: buf}}]});
const rb = device.createBuffer({size: N*4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST});
let digest = 0;
for (let it = 0; it < 10; it++) {
  const enc = device.createCommandEncoder();
  const p = enc.beginComputePass(); p.setPipeline(pipe); p.setBindGroup(0, bg); p.dispatchWorkgroups(N/64); p.end();
  enc.copyBufferToBuffer(buf, 0, rb, 0, N*4);
  device.queue.submit([enc.finish()]);
  await rb.mapAsync(GPUMapMode.READ);
  const out = new Uint32Array(rb.getMappedRange());
  for (let i = 0; i < N; i += 997) digest = (digest * 31 + out[i]) >>> 0;
  rb.unmap();
  device.queue.writeBuffer(buf, (it * 4096) % (N*4), new Uint32Array(1024).fill(it));
}
console.log("digest", digest);
process.exit(0);
