//! Worked examples and property tests of the parity arithmetic.

use super::*;
use proptest::prelude::*;

/// The definition, written independently of the tables: carry-less multiply to 16 bits,
/// then reduce by 0x11d from the top bit down.
fn ref_mul(a: u8, b: u8) -> u8 {
    let mut prod: u32 = 0;
    for bit in 0..8 {
        if (b >> bit) & 1 == 1 {
            prod ^= (a as u32) << bit;
        }
    }
    for bit in (8..16).rev() {
        if (prod >> bit) & 1 == 1 {
            prod ^= 0x11d << (bit - 8);
        }
    }
    prod as u8
}

fn ref_pow2(k: usize) -> u8 {
    (0..k).fold(1u8, |acc, _| ref_mul(acc, 2))
}

/// P and Q straight from their definitions.
fn ref_pq(data: &[Vec<u8>], len: usize) -> (Vec<u8>, Vec<u8>) {
    let mut p = vec![0u8; len];
    let mut q = vec![0u8; len];
    for (i, d) in data.iter().enumerate() {
        let c = ref_pow2(i);
        for j in 0..len {
            p[j] ^= d[j];
            q[j] ^= ref_mul(c, d[j]);
        }
    }
    (p, q)
}

/// Deterministic bytes (splitmix64) so a proptest case is just a seed.
fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) as u8
        })
        .collect()
}

#[test]
fn worked_values() {
    // x^8 = x^4 + x^3 + x^2 + 1 modulo the polynomial.
    assert_eq!(gf_exp(8), 0x1d);
    assert_eq!(gf_exp(7), 0x80);
    assert_eq!(gf_exp(255), 1);
    assert_eq!(gf_exp(256), 2);
    // 0x53 · 0xca: carry-less product 0x3f7e, reduced by 0x11d << 5, << 4, << 3, << 2
    // and << 0 gives 0x8f (by hand; in AES's field 0x11b it would be 0x01).
    assert_eq!(gf_mul(0x53, 0xca), 0x8f);
    assert_eq!(gf_mul(0x80, 2), 0x1d);
    assert_eq!(gf_inv(1), 1);
    assert_eq!(gf_inv(0), 0);
    // 2 · 0x8e = 0x11c ⊕ 0x11d = 1.
    assert_eq!(gf_inv(2), 0x8e);
}

#[test]
fn tiny_stripe() {
    // Q = D0 ⊕ 2·D1 ⊕ 4·D2: byte 0 is 01 ⊕ 04 ⊕ 10 = 15; byte 1 is
    // 80 ⊕ 2·80 ⊕ 4·01 = 80 ⊕ 1d ⊕ 04 = 99.
    let d0 = [0x01u8, 0x80];
    let d1 = [0x02u8, 0x80];
    let d2 = [0x04u8, 0x01];
    let mut p = [0u8; 2];
    let mut q = [0u8; 2];
    gen_pq(&[&d0, &d1, &d2], &mut p, Some(&mut q));
    assert_eq!(p, [0x07, 0x01]);
    assert_eq!(q, [0x15, 0x99]);
    let (mut a, mut b, mut c) = ([0xaau8; 2], d1, [0x55u8; 2]);
    let mut refs: Vec<&mut [u8]> = vec![&mut a, &mut b, &mut c, &mut p, &mut q];
    reconstruct(3, &mut refs, &[2, 0]);
    assert_eq!((a, c), (d0, d2));
}

#[test]
fn tables_match_the_definition_for_every_pair() {
    for a in 0..=255u8 {
        for b in 0..=255u8 {
            assert_eq!(gf_mul(a, b), ref_mul(a, b), "{a:#x} * {b:#x}");
            assert_eq!(mul_bitwise(a, b), ref_mul(a, b), "{a:#x} * {b:#x}");
        }
        if a != 0 {
            assert_eq!(ref_mul(a, gf_inv(a)), 1, "inverse of {a:#x}");
            assert_eq!(EXP[LOG[a as usize] as usize], a);
        }
    }
    for k in 0..600 {
        assert_eq!(gf_exp(k), ref_pow2(k), "g^{k}");
    }
}

#[test]
fn lane_multiply_by_2_matches_the_definition() {
    for a in 0..=255u8 {
        assert_eq!(mul2_byte(a), ref_mul(a, 2));
        let v = u64::from_ne_bytes([a, !a, a ^ 0x80, 0, 0xff, a, 1, 0x80]);
        let want = v.to_ne_bytes().map(|b| ref_mul(b, 2));
        assert_eq!(mul2_lanes(v).to_ne_bytes(), want);
    }
}

#[test]
fn mul_xor_into_every_power() {
    // Every byte value, at a length with a word part and a tail.
    let src: Vec<u8> = (0..=255u8).chain(0..45).collect();
    let base = bytes(7, src.len());
    for k in 0..300 {
        let mut dst = base.clone();
        mul_xor_into(&mut dst, &src, k);
        let c = ref_pow2(k);
        for j in 0..src.len() {
            assert_eq!(dst[j], base[j] ^ ref_mul(c, src[j]), "k {k} byte {j}");
        }
    }
}

#[test]
fn no_missing_leaves_the_stripe_alone() {
    let mut a = [1u8, 2];
    let mut p = [9u8, 9];
    let mut refs: Vec<&mut [u8]> = vec![&mut a, &mut p];
    reconstruct(1, &mut refs, &[]);
    assert_eq!((a, p), ([1, 2], [9, 9]));
}

#[test]
#[should_panic(expected = "missing")]
fn two_missing_without_q_is_refused() {
    let (mut a, mut b, mut p) = ([0u8; 4], [0u8; 4], [0u8; 4]);
    let mut refs: Vec<&mut [u8]> = vec![&mut a, &mut b, &mut p];
    reconstruct(2, &mut refs, &[0, 1]);
}

/// Lengths: empty, odd, word multiples and a word-loop step plus a tail.
fn lengths() -> impl Strategy<Value = usize> {
    prop_oneof![0usize..=17, (1usize..=12).prop_map(|w| 8 * w), 60usize..=80]
}

proptest! {
    #[test]
    fn gen_pq_matches_the_definition(ndata in 0usize..=16, len in lengths(), seed: u64) {
        let data: Vec<Vec<u8>> =
            (0..ndata).map(|i| bytes(seed ^ i as u64, len)).collect();
        let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
        let (mut p, mut q) = (bytes(1, len), bytes(2, len));
        gen_pq(&refs, &mut p, Some(&mut q));
        let (rp, rq) = ref_pq(&data, len);
        prop_assert_eq!(p, rp);
        prop_assert_eq!(q, rq);
    }

    #[test]
    fn every_loss_of_two_or_fewer_is_repaired(ndata in 1usize..=16, len in lengths(), seed: u64) {
        let mut stripe: Vec<Vec<u8>> =
            (0..ndata).map(|i| bytes(seed.wrapping_add(i as u64), len)).collect();
        let (p, q) = ref_pq(&stripe, len);
        stripe.push(p);
        stripe.push(q);
        let n = stripe.len();
        let mut sets: Vec<Vec<usize>> = vec![vec![]];
        for a in 0..n {
            sets.push(vec![a]);
            for b in 0..n {
                if a != b {
                    sets.push(vec![a, b]);
                }
            }
        }
        for missing in &sets {
            // With Q, and (one loss at most) without it.
            for with_q in [true, false] {
                let nb = if with_q { n } else { n - 1 };
                if missing.iter().any(|&m| m >= nb) || (!with_q && missing.len() > 1) {
                    continue;
                }
                let mut work: Vec<Vec<u8>> = stripe[..nb].to_vec();
                for &m in missing {
                    work[m] = bytes(!seed ^ m as u64, len);
                }
                let mut refs: Vec<&mut [u8]> =
                    work.iter_mut().map(|b| b.as_mut_slice()).collect();
                reconstruct(ndata, &mut refs, missing);
                prop_assert!(work[..] == stripe[..nb], "missing {:?} with_q {}", missing, with_q);
            }
        }
    }
}
