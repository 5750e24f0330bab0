//! TEMP stand-in until the parity work lands.
fn gmul(mut a: u8, mut b: u8) -> u8 { let mut p = 0; while b != 0 { if b & 1 != 0 { p ^= a; } let hi = a & 0x80; a <<= 1; if hi != 0 { a ^= 0x1d; } b >>= 1; } p }
fn gpow(k: usize) -> u8 { let mut r = 1u8; for _ in 0..k { r = gmul(r, 2); } r }
fn ginv(a: u8) -> u8 { (1..=255u8).find(|&b| gmul(a, b) == 1).unwrap() }
pub fn xor_into(dst: &mut [u8], src: &[u8]) { for (d, s) in dst.iter_mut().zip(src) { *d ^= s; } }
pub fn mul_xor_into(dst: &mut [u8], src: &[u8], k: usize) { let g = gpow(k); for (d, s) in dst.iter_mut().zip(src) { *d ^= gmul(*s, g); } }
/// bufs: data 0..ndata, P, [Q]; fill `missing`.
pub fn reconstruct(ndata: usize, bufs: &mut [&mut [u8]], missing: &[usize]) {
    let has_q = bufs.len() > ndata + 1;
    let len = bufs[0].len();
    let mut m: Vec<usize> = missing.to_vec(); m.sort();
    let data_missing: Vec<usize> = m.iter().copied().filter(|&i| i < ndata).collect();
    match data_missing.len() {
        0 => {}
        1 => {
            let x = data_missing[0];
            if !m.contains(&ndata) {
                let mut acc = bufs[ndata].to_vec();
                for k in 0..ndata { if k != x { xor_into(&mut acc, &bufs[k][..]); } }
                bufs[x].copy_from_slice(&acc);
            } else {
                assert!(has_q);
                let mut acc = bufs[ndata + 1].to_vec();
                for k in 0..ndata { if k != x { mul_xor_into(&mut acc, &bufs[k][..], k); } }
                let inv = ginv(gpow(x));
                for b in acc.iter_mut() { *b = gmul(*b, inv); }
                bufs[x].copy_from_slice(&acc);
            }
        }
        _ => {
            let (x, y) = (data_missing[0], data_missing[1]);
            let mut pxy = bufs[ndata].to_vec(); let mut qxy = bufs[ndata + 1].to_vec();
            for k in 0..ndata { if k != x && k != y { xor_into(&mut pxy, &bufs[k][..]); mul_xor_into(&mut qxy, &bufs[k][..], k); } }
            let (gx, gy) = (gpow(x), gpow(y));
            let inv = ginv(gx ^ gy);
            let mut dx = vec![0u8; len]; let mut dy = vec![0u8; len];
            for i in 0..len { let v = gmul(qxy[i] ^ gmul(gy, pxy[i]), inv); dx[i] = v; dy[i] = pxy[i] ^ v; }
            bufs[x].copy_from_slice(&dx); bufs[y].copy_from_slice(&dy);
        }
    }
    if m.contains(&ndata) { let mut acc = vec![0u8; len]; for k in 0..ndata { xor_into(&mut acc, &bufs[k][..]); } bufs[ndata].copy_from_slice(&acc); }
    if has_q && m.contains(&(ndata + 1)) { let mut acc = vec![0u8; len]; for k in 0..ndata { mul_xor_into(&mut acc, &bufs[k][..], k); } bufs[ndata + 1].copy_from_slice(&acc); }
}
