//! Broken clients, pipelined load, draining on stop, backend errors.

use super::*;

#[test]
fn broken_clients_do_not_hurt_others() {
    let mem = Arc::new(Mem::new(MIB));
    let srv = Running::start(Arc::clone(&mem));
    let mut good = Client::connect(&srv.uri()).unwrap();
    good.write(0, &[1; 4096], false).unwrap();

    // Half a write payload, then gone.
    let mut r = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    r.go("", &[INFO_BLOCK_SIZE]);
    r.request(0, CMD_WRITE, 1, 0, 65536);
    r.s.write_all(&[9; 30000]).unwrap();
    drop(r);
    // Half a request header, then gone.
    let mut r = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    r.go("", &[INFO_BLOCK_SIZE]);
    r.s.write_all(&REQUEST_MAGIC.to_be_bytes()).unwrap();
    drop(r);
    // A bad request magic: that connection is closed.
    let mut r = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    r.go("", &[INFO_BLOCK_SIZE]);
    r.s.write_all(&[0x55; REQUEST_LEN]).unwrap();
    assert!(r.closed());
    // A huge oversized write, discarded in pieces, then the client leaves half way.
    let mut r = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    r.go("", &[INFO_BLOCK_SIZE]);
    r.request(0, CMD_WRITE, 2, 0, u32::MAX - 4095);
    r.s.write_all(&vec![0u8; 8 * MIB]).unwrap();
    drop(r);

    let mut b = [0u8; 4096];
    good.read(0, &mut b).unwrap();
    assert_eq!(b, [1; 4096]);
    let mut fresh = Client::connect(&srv.uri()).unwrap();
    fresh.read(0, &mut b).unwrap();
    assert_eq!(b, [1; 4096]);
    assert_eq!(
        mem.data.read().unwrap()[4096..65536]
            .iter()
            .filter(|&&x| x == 9)
            .count(),
        0
    );
    fresh.disconnect().unwrap();
    good.disconnect().unwrap();
    srv.finish();
}

/// `conns` connections, each keeping `depth` requests in flight on its own region, checked
/// against a model of that region. In-flight requests never overlap, so the model is exact.
fn pipelined(uri: &str, region: u64, conns: u64, depth: usize, ops: usize) {
    let threads: Vec<_> = (0..conns)
        .map(|t| {
            let uri = uri.to_string();
            thread::spawn(move || {
                let base = t * region;
                let blocks = region / 4096;
                let mut model = vec![0u8; region as usize];
                let mut c = Client::connect(&uri).unwrap();
                let mut busy: std::collections::HashMap<u64, (u64, u64, Option<Vec<u8>>)> =
                    Default::default();
                let mut taken = HashSet::new();
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (t + 1);
                let mut next = move || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x >> 16
                };
                let (mut sent, mut done) = (0, 0);
                while done < ops {
                    while sent < ops && busy.len() < depth {
                        let first = next() % blocks;
                        let n = (1 + next() % 4).min(blocks - first);
                        if (first..first + n).any(|b| taken.contains(&b)) {
                            // Collect a reply first rather than retry without bound.
                            if busy.is_empty() {
                                continue;
                            }
                            break;
                        }
                        taken.extend(first..first + n);
                        let (off, len) = (first * 4096, n * 4096);
                        let h = match next() % 8 {
                            0..=3 => {
                                let expect = model[off as usize..(off + len) as usize].to_vec();
                                let h = c.submit_read(base + off, len as u32).unwrap();
                                busy.insert(h, (first, n, Some(expect)));
                                h
                            }
                            4..=6 => {
                                let d = pattern(next() + 1, len as usize);
                                model[off as usize..(off + len) as usize].copy_from_slice(&d);
                                let h = c.submit_write(base + off, &d, next() % 2 == 0).unwrap();
                                busy.insert(h, (first, n, None));
                                h
                            }
                            _ => {
                                model[off as usize..(off + len) as usize].fill(0);
                                let h = c
                                    .submit_write_zeroes(base + off, len as u32, false)
                                    .unwrap();
                                busy.insert(h, (first, n, None));
                                h
                            }
                        };
                        let _ = h;
                        sent += 1;
                    }
                    let comp = c.wait_any().unwrap();
                    assert_eq!(comp.result, Ok(()));
                    let (first, n, expect) = busy.remove(&comp.handle).unwrap();
                    if let Some(e) = expect {
                        assert!(comp.data == e, "conn {t}: read at block {first} differs");
                    }
                    for b in first..first + n {
                        taken.remove(&b);
                    }
                    done += 1;
                }
                let mut all = vec![0u8; region as usize];
                c.read(base, &mut all).unwrap();
                assert!(all == model, "conn {t}: final contents differ");
                c.disconnect().unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn four_connections_pipelined_depth_32() {
    let region = 2 * MIB as u64;
    let mem = Arc::new(Mem::new(4 * region as usize));
    let srv = Running::start(Arc::clone(&mem));
    pipelined(&srv.uri(), region, 4, 32, 3000);
    let stats = srv.finish();
    assert_eq!(stats.errors, 0);
    assert!(stats.requests >= 4 * 3000);
}

#[test]
fn stop_drains_requests_in_flight() {
    let mut m = Mem::new(MIB);
    m.delay = Duration::from_millis(200);
    let mem = Arc::new(m);
    mem.fill(0, MIB as u64, 0x42);
    let srv = Running::start_on(
        &Listen::Tcp("127.0.0.1:0".parse().unwrap()),
        Arc::clone(&mem),
        Some(8),
    );
    let mut c = Client::connect(&srv.uri()).unwrap();
    let handles: HashSet<u64> = (0..8)
        .map(|i| c.submit_read(i * 4096, 4096).unwrap())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while mem.started.load(Ordering::SeqCst) < 8 {
        assert!(Instant::now() < deadline, "requests did not start");
        thread::sleep(Duration::from_millis(2));
    }
    let t0 = Instant::now();
    let stats = srv.finish();
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert_eq!(stats.requests, 8);
    let mut got = HashSet::new();
    for _ in 0..8 {
        let done = c.wait_any().unwrap();
        assert_eq!(done.result, Ok(()));
        assert_eq!(done.data, vec![0x42; 4096]);
        got.insert(done.handle);
    }
    assert_eq!(got, handles);
    // Then the server has closed the connection.
    assert!(c.read(0, &mut [0u8; 4096]).is_err());
}

#[test]
fn backend_errors_and_panics_become_error_replies() {
    let mut m = Mem::new(MIB);
    m.faulty = true;
    let mem = Arc::new(m);
    let srv = Running::start_on(
        &Listen::Tcp("[::1]:0".parse().unwrap()),
        Arc::clone(&mem),
        Some(1),
    );
    assert!(srv.addr.starts_with("[::1]:"), "{}", srv.addr);
    let mut c = Client::connect(&srv.uri()).unwrap();
    let mut b = [0u8; 4096];
    assert_eq!(server_errno(c.read(EIO_AT, &mut b)), EIO);
    assert_eq!(server_errno(c.read(PANIC_AT, &mut b)), EIO);
    // The only worker survived its backend's panic.
    c.read(0, &mut b).unwrap();
    c.disconnect().unwrap();
    let stats = srv.finish();
    assert_eq!((stats.requests, stats.errors), (3, 2));
}
