// kernel k0_layer_norm_gelu: layer_norm, gelu
// fused graph nodes: %3 %4
// reduce/persistent x4: 8192 rows of 4096, 2 reductions, 4 elements per step, 256 threads per workgroup

// a0: b0 f32[33554432] (input 0)
@group(0) @binding(0) var<storage, read> a0: array<vec4<f32>>;
// a1: b1 f32[4096] (input 1)
@group(0) @binding(1) var<storage, read> a1: array<vec4<f32>>;
// a2: b2 f32[4096] (input 2)
@group(0) @binding(2) var<storage, read> a2: array<vec4<f32>>;
// a3: b3 f32[33554432] (output 0)
@group(0) @binding(3) var<storage, read_write> a3: array<vec4<f32>>;

var<workgroup> sh_f32: array<f32, 256>;

// erf: Taylor series below 0.5, 1 - erfc (Numerical Recipes erfcc, rel. error < 1.2e-7) above
fn sinter_erf_v4(x: vec4<f32>) -> vec4<f32> {
    let a = abs(x);
    let s = a * a;
    let p = x * 1.1283791670955126 * (1.0 + s * (-0.3333333333333333 + s * (0.1 + s * (-0.023809523809523808
        + s * (0.004629629629629629 + s * (-7.575757575757576e-4 + s * (1.0683760683760684e-4
        + s * -1.3227513227513228e-5)))))));
    let t = 1.0 / (1.0 + 0.5 * a);
    let y = t * exp(-s - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
        + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
    let q = select(y - 1.0, 1.0 - y, x >= vec4<f32>(0.0));
    return select(q, p, a < vec4<f32>(0.5));
}

fn sinter_sqrt(x: f32) -> f32 {
    return select(sqrt(x), f32(bitcast<f32>(0x7fc00000u)), x < f32(0.0));
}

@compute @workgroup_size(256, 1, 1)
fn k0_layer_norm_gelu(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) sg_lane: u32, @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_id) sg_id: u32, @builtin(num_subgroups) n_sg: u32) {
    let wid = wg.x;
    let row = wid;
    var c0: array<vec4<f32>, 4>;
    // reduction 0: Sum of v0 (f32)
    var acc0: vec4<f32> = vec4<f32>(0.0);
    {
        let red = (lid) * 4u;
        let i1 = row * 4096u + red;
        let v0: vec4<f32> = a0[i1 >> 2u];
        c0[0] = v0;
        acc0 = acc0 + v0;
    }
    {
        let red = (lid + 256u) * 4u;
        let i3 = row * 4096u + red;
        let v0: vec4<f32> = a0[i3 >> 2u];
        c0[1] = v0;
        acc0 = acc0 + v0;
    }
    {
        let red = (lid + 512u) * 4u;
        let i5 = row * 4096u + red;
        let v0: vec4<f32> = a0[i5 >> 2u];
        c0[2] = v0;
        acc0 = acc0 + v0;
    }
    {
        let red = (lid + 768u) * 4u;
        let i7 = row * 4096u + red;
        let v0: vec4<f32> = a0[i7 >> 2u];
        c0[3] = v0;
        acc0 = acc0 + v0;
    }
    let h0 = acc0.x + acc0.y + acc0.z + acc0.w;
    var x0: f32 = h0;
    for (var o = sg_size >> 1u; o > 0u; o = o >> 1u) {
        x0 = x0 + subgroupShuffleXor(x0, o);
    }
    if (sg_lane == 0u) {
        sh_f32[sg_id] = x0;
    }
    workgroupBarrier();
    var y0: f32 = 0.0;
    for (var b = 0u; b < n_sg; b = b + sg_size) {
        let q = b + sg_lane;
        if (q < n_sg) {
            y0 = y0 + sh_f32[q];
        }
    }
    for (var o = sg_size >> 1u; o > 0u; o = o >> 1u) {
        y0 = y0 + subgroupShuffleXor(y0, o);
    }
    let r0 = y0;
    workgroupBarrier();
    // reduction 1: Sum of v5 (f32)
    let v1: f32 = r0;
    let v2: f32 = 0.00024414063f;
    let v3: f32 = (v1) * (v2);
    var acc1: vec4<f32> = vec4<f32>(0.0);
    {
        let red = (lid) * 4u;
        let v0: vec4<f32> = c0[0];
        let v4: vec4<f32> = (v0) - (vec4<f32>(v3));
        let v5: vec4<f32> = (v4) * (v4);
        acc1 = acc1 + v5;
    }
    {
        let red = (lid + 256u) * 4u;
        let v0: vec4<f32> = c0[1];
        let v4: vec4<f32> = (v0) - (vec4<f32>(v3));
        let v5: vec4<f32> = (v4) * (v4);
        acc1 = acc1 + v5;
    }
    {
        let red = (lid + 512u) * 4u;
        let v0: vec4<f32> = c0[2];
        let v4: vec4<f32> = (v0) - (vec4<f32>(v3));
        let v5: vec4<f32> = (v4) * (v4);
        acc1 = acc1 + v5;
    }
    {
        let red = (lid + 768u) * 4u;
        let v0: vec4<f32> = c0[3];
        let v4: vec4<f32> = (v0) - (vec4<f32>(v3));
        let v5: vec4<f32> = (v4) * (v4);
        acc1 = acc1 + v5;
    }
    let h1 = acc1.x + acc1.y + acc1.z + acc1.w;
    var x1: f32 = h1;
    for (var o = sg_size >> 1u; o > 0u; o = o >> 1u) {
        x1 = x1 + subgroupShuffleXor(x1, o);
    }
    if (sg_lane == 0u) {
        sh_f32[sg_id] = x1;
    }
    workgroupBarrier();
    var y1: f32 = 0.0;
    for (var b = 0u; b < n_sg; b = b + sg_size) {
        let q = b + sg_lane;
        if (q < n_sg) {
            y1 = y1 + sh_f32[q];
        }
    }
    for (var o = sg_size >> 1u; o > 0u; o = o >> 1u) {
        y1 = y1 + subgroupShuffleXor(y1, o);
    }
    let r1 = y1;
    workgroupBarrier();
    // element stores
    let v6: f32 = r1;
    let v7: f32 = (v6) * (v2);
    let v8: f32 = 1e-5f;
    let v9: f32 = (v7) + (v8);
    let v10: f32 = 1.0 / sinter_sqrt(v9);
    let v16: f32 = 0.5f;
    let v18: f32 = 0.70710677f;
    let v21: f32 = 1.0f;
    {
        let red = (lid) * 4u;
        let v0: vec4<f32> = c0[0];
        let v4: vec4<f32> = (v0) - (vec4<f32>(v3));
        let v11: vec4<f32> = (v4) * (vec4<f32>(v10));
        let v12: vec4<f32> = a1[red >> 2u];
        let v13: vec4<f32> = (v11) * (v12);
        let v14: vec4<f32> = a2[red >> 2u];
        let v15: vec4<f32> = (v13) + (v14);
        let v17: vec4<f32> = (v15) * (vec4<f32>(v16));
        let v19: vec4<f32> = (v15) * (vec4<f32>(v18));
        let v20: vec4<f32> = sinter_erf_v4(v19);
        let v22: vec4<f32> = (v20) + (vec4<f32>(v21));
        let v23: vec4<f32> = (v17) * (v22);
        let i12 = row * 4096u + red;
        a3[i12 >> 2u] = v23;
    }
    {
        let red = (lid + 256u) * 4u;
        let v0: vec4<f32> = c0[1];
        let v4: vec4<f32> = (v0) - (vec4<f32>(v3));
        let v11: vec4<f32> = (v4) * (vec4<f32>(v10));
        let v12: vec4<f32> = a1[red >> 2u];
        let v13: vec4<f32> = (v11) * (v12);
        let v14: vec4<f32> = a2[red >> 2u];
        let v15: vec4<f32> = (v13) + (v14);
        let v17: vec4<f32> = (v15) * (vec4<f32>(v16));
        let v19: vec4<f32> = (v15) * (vec4<f32>(v18));
        let v20: vec4<f32> = sinter_erf_v4(v19);
        let v22: vec4<f32> = (v20) + (vec4<f32>(v21));
        let v23: vec4<f32> = (v17) * (v22);
        let i16 = row * 4096u + red;
        a3[i16 >> 2u] = v23;
    }
    {
        let red = (lid + 512u) * 4u;
        let v0: vec4<f32> = c0[2];
        let v4: vec4<f32> = (v0) - (vec4<f32>(v3));
        let v11: vec4<f32> = (v4) * (vec4<f32>(v10));
        let v12: vec4<f32> = a1[red >> 2u];
        let v13: vec4<f32> = (v11) * (v12);
        let v14: vec4<f32> = a2[red >> 2u];
        let v15: vec4<f32> = (v13) + (v14);
        let v17: vec4<f32> = (v15) * (vec4<f32>(v16));
        let v19: vec4<f32> = (v15) * (vec4<f32>(v18));
        let v20: vec4<f32> = sinter_erf_v4(v19);
        let v22: vec4<f32> = (v20) + (vec4<f32>(v21));
        let v23: vec4<f32> = (v17) * (v22);
        let i20 = row * 4096u + red;
        a3[i20 >> 2u] = v23;
    }
    {
        let red = (lid + 768u) * 4u;
        let v0: vec4<f32> = c0[3];
        let v4: vec4<f32> = (v0) - (vec4<f32>(v3));
        let v11: vec4<f32> = (v4) * (vec4<f32>(v10));
        let v12: vec4<f32> = a1[red >> 2u];
        let v13: vec4<f32> = (v11) * (v12);
        let v14: vec4<f32> = a2[red >> 2u];
        let v15: vec4<f32> = (v13) + (v14);
        let v17: vec4<f32> = (v15) * (vec4<f32>(v16));
        let v19: vec4<f32> = (v15) * (vec4<f32>(v18));
        let v20: vec4<f32> = sinter_erf_v4(v19);
        let v22: vec4<f32> = (v20) + (vec4<f32>(v21));
        let v23: vec4<f32> = (v17) * (v22);
        let i24 = row * 4096u + red;
        a3[i24 >> 2u] = v23;
    }
}
