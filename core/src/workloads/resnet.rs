//! ResNet-18 for the `resnet18_b32_f32` workload: its inputs (torchvision's initialization), its
//! traced graph and an independent f64 reference (plain loops over NCHW activations).

use super::*;

pub(super) fn resnet_specs(batch: usize, hw: usize) -> Vec<InputSpec> {
    let dt = DType::F32;
    let mut v = vec![spec("x", dt, &[batch, 3, hw, hw], Dist::Normal(1.0))];
    // torchvision: kaiming_normal_(mode="fan_out", nonlinearity="relu").
    let conv = |v: &mut Vec<InputSpec>, name: String, co: usize, ci: usize, k: usize| {
        let std = (2.0 / (co * k * k) as f64).sqrt();
        v.push(spec(&name, dt, &[co, ci, k, k], Dist::Normal(std)));
    };
    let bn = |v: &mut Vec<InputSpec>, p: String, c: usize| {
        v.push(spec(&format!("{p}.weight"), dt, &[c], Dist::Uniform(0.5, 1.5)));
        v.push(spec(&format!("{p}.bias"), dt, &[c], Dist::Uniform(-0.2, 0.2)));
        v.push(spec(&format!("{p}.running_mean"), dt, &[c], Dist::Uniform(-0.2, 0.2)));
        v.push(spec(&format!("{p}.running_var"), dt, &[c], Dist::Uniform(0.5, 1.5)));
    };
    conv(&mut v, "conv1.weight".into(), 64, 3, 7);
    bn(&mut v, "bn1".into(), 64);
    let mut cin = 64;
    for (li, &(c, stride)) in RESNET_STAGES.iter().enumerate() {
        for bi in 0..2 {
            let p = format!("layer{}.{bi}", li + 1);
            let ci = if bi == 0 { cin } else { c };
            conv(&mut v, format!("{p}.conv1.weight"), c, ci, 3);
            bn(&mut v, format!("{p}.bn1"), c);
            conv(&mut v, format!("{p}.conv2.weight"), c, c, 3);
            bn(&mut v, format!("{p}.bn2"), c);
            if bi == 0 && (stride != 1 || ci != c) {
                conv(&mut v, format!("{p}.downsample.0.weight"), c, ci, 1);
                bn(&mut v, format!("{p}.downsample.1"), c);
            }
        }
        cin = c;
    }
    // nn.Linear's default init: uniform(-1/sqrt(in), 1/sqrt(in)).
    let b = 1.0 / 512f64.sqrt();
    v.push(spec("fc.weight", dt, &[1000, 512], Dist::Uniform(-b, b)));
    v.push(spec("fc.bias", dt, &[1000], Dist::Uniform(-b, b)));
    v
}

pub(super) fn resnet_graph(p: &HashMap<&str, &Tensor>) -> Result<Tensor, Error> {
    let get = |n: &str| p.get(n).copied().ok_or_else(|| Error::Input(format!("resnet18: no input {n:?}")));
    let conv_bn = |x: &Tensor, conv: &str, bn: &str, stride: usize, pad: usize| -> Result<Tensor, Error> {
        let y = x.conv2d(get(conv)?, None, [stride, stride], [pad; 4], [1, 1], 1);
        Ok(y.batch_norm(
            get(&format!("{bn}.weight"))?,
            get(&format!("{bn}.bias"))?,
            get(&format!("{bn}.running_mean"))?,
            get(&format!("{bn}.running_var"))?,
            1e-5,
        ))
    };
    let x = get("x")?;
    let mut y = conv_bn(x, "conv1.weight", "bn1", 2, 3)?.relu().max_pool2d([3, 3], [2, 2], [1; 4]);
    let mut cin = 64;
    for (li, &(c, stride)) in RESNET_STAGES.iter().enumerate() {
        for bi in 0..2 {
            let p = format!("layer{}.{bi}", li + 1);
            let s = if bi == 0 { stride } else { 1 };
            let h = conv_bn(&y, &format!("{p}.conv1.weight"), &format!("{p}.bn1"), s, 1)?.relu();
            let h = conv_bn(&h, &format!("{p}.conv2.weight"), &format!("{p}.bn2"), 1, 1)?;
            let ci = if bi == 0 { cin } else { c };
            let identity = if bi == 0 && (stride != 1 || ci != c) {
                conv_bn(&y, &format!("{p}.downsample.0.weight"), &format!("{p}.downsample.1"), s, 0)?
            } else {
                y.clone()
            };
            y = (&h + &identity).relu();
        }
        cin = c;
    }
    let pooled = y.mean(&[2, 3], false);
    Ok(pooled.matmul(&get("fc.weight")?.transpose(0, 1)) + get("fc.bias")?)
}

/// A dense NCHW activation for the ResNet reference.
pub(super) struct Act {
    v: Vec<f64>,
    n: usize,
    c: usize,
    h: usize,
    w: usize,
}

pub(super) fn ref_conv(x: &Act, w: &[f64], co: usize, k: usize, stride: usize, pad: usize) -> Act {
    let oh = (x.h + 2 * pad - k) / stride + 1;
    let ow = (x.w + 2 * pad - k) / stride + 1;
    let mut out = vec![0.0; x.n * co * oh * ow];
    for n in 0..x.n {
        for o in 0..co {
            for i in 0..oh {
                for j in 0..ow {
                    let mut s = 0.0;
                    for c in 0..x.c {
                        for di in 0..k {
                            let yi = (i * stride + di) as isize - pad as isize;
                            if yi < 0 || yi >= x.h as isize {
                                continue;
                            }
                            for dj in 0..k {
                                let xj = (j * stride + dj) as isize - pad as isize;
                                if xj < 0 || xj >= x.w as isize {
                                    continue;
                                }
                                let xv = x.v[((n * x.c + c) * x.h + yi as usize) * x.w + xj as usize];
                                s += xv * w[((o * x.c + c) * k + di) * k + dj];
                            }
                        }
                    }
                    out[((n * co + o) * oh + i) * ow + j] = s;
                }
            }
        }
    }
    Act { v: out, n: x.n, c: co, h: oh, w: ow }
}

pub(super) fn ref_bn(x: &mut Act, p: &HashMap<&str, &[f64]>, name: &str) -> Result<(), Error> {
    let get =
        |s: &str| p.get(format!("{name}.{s}").as_str()).copied().ok_or_else(|| Error::Input(format!("no {name}.{s}")));
    let (w, b, m, var) = (get("weight")?, get("bias")?, get("running_mean")?, get("running_var")?);
    let hw = x.h * x.w;
    for (i, v) in x.v.iter_mut().enumerate() {
        let c = (i / hw) % x.c;
        *v = round_to(DType::F32, (*v - m[c]) / (var[c] + 1e-5).sqrt() * w[c] + b[c]);
    }
    Ok(())
}

pub(super) fn ref_relu(x: &mut Act) {
    x.v.iter_mut().for_each(|v| *v = v.max(0.0));
}

pub(super) fn ref_resnet(p: &HashMap<&str, &[f64]>, batch: usize, hw: usize) -> Result<Vec<f64>, Error> {
    let get = |s: &str| p.get(s).copied().ok_or_else(|| Error::Input(format!("resnet18: no input {s:?}")));
    let conv_bn = |x: &Act, conv: &str, bn: &str, co: usize, k: usize, stride: usize| -> Result<Act, Error> {
        let mut y = ref_conv(x, get(conv)?, co, k, stride, k / 2);
        y.v.iter_mut().for_each(|v| *v = round_to(DType::F32, *v));
        ref_bn(&mut y, p, bn)?;
        Ok(y)
    };
    let x = Act { v: get("x")?.to_vec(), n: batch, c: 3, h: hw, w: hw };
    let mut y = conv_bn(&x, "conv1.weight", "bn1", 64, 7, 2)?;
    ref_relu(&mut y);
    // Max pool 3x3, stride 2, padding 1 (padding never wins).
    let (oh, ow) = ((y.h + 2 - 3) / 2 + 1, (y.w + 2 - 3) / 2 + 1);
    let mut pooled = vec![f64::NEG_INFINITY; y.n * y.c * oh * ow];
    for nc in 0..y.n * y.c {
        for i in 0..oh {
            for j in 0..ow {
                let o = &mut pooled[(nc * oh + i) * ow + j];
                for di in 0..3 {
                    for dj in 0..3 {
                        let (yi, xj) = ((i * 2 + di) as isize - 1, (j * 2 + dj) as isize - 1);
                        if yi >= 0 && xj >= 0 && (yi as usize) < y.h && (xj as usize) < y.w {
                            *o = o.max(y.v[(nc * y.h + yi as usize) * y.w + xj as usize]);
                        }
                    }
                }
            }
        }
    }
    let mut y = Act { v: pooled, n: y.n, c: y.c, h: oh, w: ow };
    let mut cin = 64;
    for (li, &(c, stride)) in RESNET_STAGES.iter().enumerate() {
        for bi in 0..2 {
            let pre = format!("layer{}.{bi}", li + 1);
            let s = if bi == 0 { stride } else { 1 };
            let mut h = conv_bn(&y, &format!("{pre}.conv1.weight"), &format!("{pre}.bn1"), c, 3, s)?;
            ref_relu(&mut h);
            let h = conv_bn(&h, &format!("{pre}.conv2.weight"), &format!("{pre}.bn2"), c, 3, 1)?;
            let ci = if bi == 0 { cin } else { c };
            let identity = if bi == 0 && (stride != 1 || ci != c) {
                conv_bn(&y, &format!("{pre}.downsample.0.weight"), &format!("{pre}.downsample.1"), c, 1, s)?
            } else {
                y
            };
            let v = h.v.iter().zip(&identity.v).map(|(a, b)| round_to(DType::F32, a + b).max(0.0)).collect();
            y = Act { v, ..h };
        }
        cin = c;
    }
    // Global average pool, then fc: x @ W^T + b.
    let hw = y.h * y.w;
    let feats: Vec<f64> = y.v.chunks(hw).map(|ch| round_to(DType::F32, ch.iter().sum::<f64>() / hw as f64)).collect();
    let (fw, fb) = (get("fc.weight")?, get("fc.bias")?);
    let mut out = ref_matmul(&feats, fw, 1, batch, 512, 1000, true);
    out.iter_mut().enumerate().for_each(|(i, v)| *v += fb[i % 1000]);
    Ok(out)
}
