//! Slow, stuck and hostile clients: sub-block requests over the wire, timeouts, budgets,
//! the connection limit, long TRIMs, garbage; a well-behaved client keeps working with
//! bounded latency while attackers run. Every wait is bounded; loopback only.

use super::*;

fn tcp() -> Listen {
    Listen::Tcp("127.0.0.1:0".parse().unwrap())
}

/// Short timeouts so the tests see them fire.
fn quick() -> Limits {
    Limits {
        handshake_timeout: Duration::from_millis(800),
        idle_timeout: Duration::from_millis(800),
        ..Limits::default()
    }
}

/// Wait (bounded) until the server closes `s`; true if it did.
fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut b = [0u8; 4096];
    let until = Instant::now() + limit;
    while Instant::now() < until {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
    false
}

#[test]
fn sub_block_requests_over_the_wire() {
    let mem = Arc::new(Mem::new(MIB));
    mem.fill(0, MIB as u64, 0x11);
    let limits = Limits {
        min_block: Some(1),
        ..Limits::default()
    };
    let srv = Running::start_with(&tcp(), Arc::clone(&mem), None, limits);
    let mut c = Client::connect(&srv.uri()).unwrap();
    assert_eq!(
        c.block_size(),
        BlockSize {
            minimum: 1,
            preferred: 65536,
            maximum: 4 * MIB as u32
        }
    );
    // mkfs.ext4 over a loop device: 512-byte and 1 KiB writes at 512-byte offsets.
    c.write(512, &[0xa1; 512], false).unwrap();
    c.write(4096 - 512, &[0xb2; 1024], true).unwrap();
    c.write(10_001, &[0xc3; 3], false).unwrap();
    c.write_zeroes(20_000, 100, false).unwrap();
    c.trim(30_000, 5000, false).unwrap();
    let mut want = vec![0x11u8; 40_000];
    want[512..1024].fill(0xa1);
    want[3584..4608].fill(0xb2);
    want[10_001..10_004].fill(0xc3);
    want[20_000..20_100].fill(0);
    want[30_000..35_000].fill(0);
    assert_eq!(&mem.data.read().unwrap()[..40_000], &want[..]);
    let mut b = vec![0u8; 1001];
    c.read(3333, &mut b).unwrap();
    assert_eq!(b, want[3333..4334]);
    let mut one = [0u8; 1];
    c.read(MIB as u64 - 1, &mut one).unwrap();
    assert_eq!(one, [0x11]);
    // Past the end is still refused, by the same rules as before.
    assert_eq!(server_errno(c.read(MIB as u64 - 1, &mut [0u8; 2])), EINVAL);
    c.disconnect().unwrap();

    // With a 1-byte minimum, GO without asking for block sizes is fine.
    let mut r = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    r.go("", &[]);
    r.request(0, CMD_READ, 1, 100, 7);
    assert_eq!(r.simple_reply(), (Errno(0), 1));
    let mut d = [0u8; 7];
    r.s.read_exact(&mut d).unwrap();
    assert_eq!(d, [0x11; 7]);
    let stats = srv.finish();
    assert_eq!(stats.errors, 1);

    // Strict (the library's default): a block-size request in an earlier INFO counts for
    // the GO that follows.
    let srv = Running::start(Arc::new(Mem::new(MIB)));
    let mut r = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    r.option(OPT_INFO, &info_data("", &[INFO_BLOCK_SIZE]));
    while r.reply().1 != REP_ACK {}
    r.go("", &[]);
    r.request(0, CMD_READ, 2, 512, 512);
    assert_eq!(r.simple_reply(), (EINVAL, 2));
    srv.finish();
}

#[test]
fn silent_and_slow_handshakes_time_out() {
    let srv = Running::start_with(&tcp(), Arc::new(Mem::new(MIB)), None, quick());
    let t0 = Instant::now();
    // Connects and says nothing.
    let mut silent = TcpStream::connect(&srv.addr).unwrap();
    // Trickles a valid handshake one byte at a time, slower than the deadline allows.
    let mut slow = TcpStream::connect(&srv.addr).unwrap();
    let mut g = [0u8; 18];
    slow.read_exact(&mut g).unwrap();
    let trickle = thread::spawn(move || {
        let flags = (FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes();
        for b in flags.iter().chain(IHAVEOPT.to_be_bytes().iter()) {
            if slow.write_all(&[*b]).is_err() {
                break;
            }
            thread::sleep(Duration::from_millis(150));
        }
        slow
    });
    assert!(closed_within(&mut silent, Duration::from_secs(5)));
    let mut slow = trickle.join().unwrap();
    assert!(closed_within(&mut slow, Duration::from_secs(5)));
    assert!(t0.elapsed() < Duration::from_secs(5));
    // Meanwhile and afterwards a normal client gets in.
    let mut c = Client::connect(&srv.uri()).unwrap();
    c.read(0, &mut [0u8; 4096]).unwrap();
    c.disconnect().unwrap();
    let stats = srv.finish();
    assert!(stats.timed_out >= 2, "{stats:?}");
}

#[test]
fn stalled_requests_time_out_and_free_their_budget() {
    let mut m = Mem::new(8 * MIB);
    m.block.maximum = 32 * MIB as u32;
    let mem = Arc::new(m);
    // A small budget: 8 MiB over all, 2 MiB per connection (so 2 MiB requests at most).
    let limits = Limits {
        payload_budget: 8 * MIB,
        conn_payload_budget: 2 * MIB,
        ..quick()
    };
    let srv = Running::start_with(&tcp(), Arc::clone(&mem), None, limits);
    let mut good = Client::connect(&srv.uri()).unwrap();
    assert_eq!(good.block_size().maximum, 2 * MIB as u32);
    // Six connections send a maximal WRITE header and most of its payload, then stop: more
    // than the receivers' half of the budget.
    let mut stalled: Vec<Raw> = (0..6)
        .map(|i| {
            let mut r = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
            r.go("", &[INFO_BLOCK_SIZE]);
            r.request(0, CMD_WRITE, i, 0, 2 * MIB as u32);
            // The server stops reading once its budget is taken; a write blocked in the
            // kernel's buffers must not block the test.
            r.s.set_write_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            let _ = r.s.write_all(&vec![0xee; 3 * MIB / 2]);
            r
        })
        .collect();
    // Reads go through at once: receivers cannot take the whole budget.
    let t0 = Instant::now();
    let mut b = vec![0u8; 2 * MIB];
    for _ in 0..5 {
        good.read(0, &mut b).unwrap();
    }
    assert!(
        t0.elapsed() < Duration::from_millis(600),
        "{:?}",
        t0.elapsed()
    );
    // A write may wait for the receivers' share, but no longer than the idle timeout.
    good.write(0, &vec![0x5a; 2 * MIB], false).unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5));
    for r in &mut stalled {
        assert!(closed_within(&mut r.s, Duration::from_secs(5)));
    }
    // Nothing of the stalled payloads reached the export.
    assert!(mem.data.read().unwrap().iter().all(|&x| x != 0xee));
    // A header cut in half times out too (not between requests: mid-request).
    let mut r = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    r.go("", &[INFO_BLOCK_SIZE]);
    r.s.write_all(&REQUEST_MAGIC.to_be_bytes()).unwrap();
    assert!(closed_within(&mut r.s, Duration::from_secs(5)));
    // An idle connection between requests is not a stalled one.
    thread::sleep(Duration::from_millis(1000));
    good.read(0, &mut b[..4096]).unwrap();
    assert_eq!(b[..4096], [0x5a; 4096]);
    good.disconnect().unwrap();
    let stats = srv.finish();
    assert!(stats.timed_out >= 7, "{stats:?}");
}

#[test]
fn connection_limit_evicts_the_oldest_handshake_first() {
    let limits = Limits {
        max_connections: 4,
        ..Limits::default()
    };
    let srv = Running::start_with(&tcp(), Arc::new(Mem::new(MIB)), None, limits);
    let mut c1 = Client::connect(&srv.uri()).unwrap();
    let mut silent: Vec<TcpStream> = (0..3)
        .map(|_| {
            let s = TcpStream::connect(&srv.addr).unwrap();
            // In order: the server must have accepted each before the next.
            thread::sleep(Duration::from_millis(30));
            s
        })
        .collect();
    // Full: the newcomer evicts the oldest silent connection, not the serving one.
    let mut c2 = Client::connect(&srv.uri()).unwrap();
    assert!(closed_within(&mut silent[0], Duration::from_secs(5)));
    c1.read(0, &mut [0u8; 4096]).unwrap();
    c2.read(0, &mut [0u8; 4096]).unwrap();
    let mut c3 = Client::connect(&srv.uri()).unwrap();
    let mut c4 = Client::connect(&srv.uri()).unwrap();
    assert!(closed_within(&mut silent[1], Duration::from_secs(5)));
    assert!(closed_within(&mut silent[2], Duration::from_secs(5)));
    // Four serving connections: the fifth is refused, and they carry on.
    thread::sleep(Duration::from_millis(50));
    assert!(Client::connect(&srv.uri()).is_err());
    for c in [&mut c1, &mut c2, &mut c3, &mut c4] {
        c.read(0, &mut [0u8; 4096]).unwrap();
    }
    for c in [c1, c2, c3, c4] {
        c.disconnect().unwrap();
    }
    let stats = srv.finish();
    assert_eq!((stats.evicted, stats.refused), (3, 1), "{stats:?}");
}

#[test]
fn long_trims_run_in_pieces() {
    let mem = Arc::new(Mem::new(16 * MIB));
    mem.fill(0, 16 * MIB as u64, 7);
    let limits = Limits {
        zero_piece: MIB as u64,
        ..Limits::default()
    };
    let srv = Running::start_with(&tcp(), Arc::clone(&mem), None, limits);
    let mut c = Client::connect(&srv.uri()).unwrap();
    let before = mem.started.load(Ordering::SeqCst);
    c.trim(4096, 16 * MIB as u32 - 8192, true).unwrap();
    // 16 MiB - 8 KiB in 1 MiB pieces: 16 backend calls, each with FUA.
    assert_eq!(mem.started.load(Ordering::SeqCst) - before, 16);
    assert_eq!(mem.fua.load(Ordering::SeqCst), 16);
    let d = mem.data.read().unwrap();
    assert!(d[..4096].iter().all(|&x| x == 7));
    assert!(d[4096..16 * MIB - 4096].iter().all(|&x| x == 0));
    assert!(d[16 * MIB - 4096..].iter().all(|&x| x == 7));
    drop(d);
    // The whole export at once, in pieces too.
    c.write_zeroes(0, 16 * MIB as u32, false).unwrap();
    assert!(mem.data.read().unwrap().iter().all(|&x| x == 0));
    c.disconnect().unwrap();
    srv.finish();
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

/// A good client's 4 KiB reads and writes at depth 1, at least `ops` of them and for at
/// least `min_time`: (requests, p50, p99, max).
fn good_latency(
    uri: &str,
    ops: usize,
    min_time: Duration,
) -> (usize, Duration, Duration, Duration) {
    let mut c = Client::connect(uri).unwrap();
    let mut lat = Vec::with_capacity(ops);
    let mut b = [0u8; 4096];
    let t0 = Instant::now();
    // Bounded: at most ten times `ops`, whatever the clock says.
    for i in 0..ops * 10 {
        if i >= ops && t0.elapsed() >= min_time {
            break;
        }
        let offset = (i as u64 * 7919 % 1024) * 4096;
        let t = Instant::now();
        if i % 4 == 3 {
            c.write(offset, &[i as u8; 4096], false).unwrap();
        } else {
            c.read(offset, &mut b).unwrap();
        }
        lat.push(t.elapsed());
    }
    c.disconnect().unwrap();
    lat.sort();
    (
        lat.len(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        *lat.last().unwrap(),
    )
}

/// An attacker: repeats `attack` on fresh connections until `stop`.
fn attacker(
    addr: String,
    stop: Arc<AtomicBool>,
    attack: impl Fn(&str) + Send + 'static,
) -> JoinHandle<u64> {
    thread::spawn(move || {
        let mut rounds = 0;
        while !stop.load(Ordering::Relaxed) {
            attack(&addr);
            rounds += 1;
        }
        rounds
    })
}

/// Connect and enter transmission; `None` if the server is busy evicting or refusing.
fn raw_go(addr: &str) -> Option<Raw> {
    let s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(2))).ok()?;
    let mut r = Raw { s };
    let mut g = [0u8; 18];
    r.s.read_exact(&mut g).ok()?;
    r.s.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes())
        .ok()?;
    r.option(OPT_GO, &info_data("", &[INFO_BLOCK_SIZE]));
    loop {
        let mut h = [0u8; 20];
        r.s.read_exact(&mut h).ok()?;
        let len = u32::from_be_bytes(h[16..].try_into().unwrap()) as usize;
        let mut d = vec![0u8; len];
        r.s.read_exact(&mut d).ok()?;
        if u32::from_be_bytes(h[12..16].try_into().unwrap()) == REP_ACK {
            return Some(r);
        }
    }
}

/// The suite: a good client's latency alone, then with every kind of attacker at once.
#[test]
fn hostile_clients_do_not_stall_a_good_one() {
    let mut m = Mem::new(64 * MIB);
    m.block.maximum = 32 * MIB as u32;
    let mem = Arc::new(m);
    let limits = Limits {
        zero_piece: MIB as u64,
        ..quick()
    };
    let srv = Running::start_with(&tcp(), Arc::clone(&mem), None, limits);
    let uri = srv.uri();
    let ops = 3000;
    let alone = good_latency(&uri, ops, Duration::ZERO);

    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    // Six: a 32 MiB WRITE header, then silence until the idle timeout closes them.
    for _ in 0..6 {
        threads.push(attacker(srv.addr.clone(), Arc::clone(&stop), |addr| {
            if let Some(mut r) = raw_go(addr) {
                r.request(0, CMD_WRITE, 1, 0, 32 * MIB as u32);
                let _ = closed_within(&mut r.s, Duration::from_secs(5));
            } else {
                thread::sleep(Duration::from_millis(20));
            }
        }));
    }
    // Two: most of a 32 MiB payload, then silence.
    for _ in 0..2 {
        threads.push(attacker(srv.addr.clone(), Arc::clone(&stop), |addr| {
            if let Some(mut r) = raw_go(addr) {
                r.request(0, CMD_WRITE, 1, 0, 32 * MIB as u32);
                let _ = r.s.write_all(&vec![0xee; 24 * MIB]);
                let _ = closed_within(&mut r.s, Duration::from_secs(5));
            } else {
                thread::sleep(Duration::from_millis(20));
            }
        }));
    }
    // Ten: connect and never finish the handshake.
    for _ in 0..10 {
        threads.push(attacker(srv.addr.clone(), Arc::clone(&stop), |addr| {
            if let Ok(mut s) = TcpStream::connect(addr) {
                let _ = closed_within(&mut s, Duration::from_secs(5));
            }
        }));
    }
    // Two: whole-export TRIMs and WRITE_ZEROES, eight in flight, again and again.
    for _ in 0..2 {
        let stop2 = Arc::clone(&stop);
        threads.push(attacker(srv.addr.clone(), Arc::clone(&stop), move |addr| {
            let Some(mut r) = raw_go(addr) else {
                thread::sleep(Duration::from_millis(20));
                return;
            };
            while !stop2.load(Ordering::Relaxed) {
                for i in 0..8u64 {
                    let kind = if i % 2 == 0 {
                        CMD_TRIM
                    } else {
                        CMD_WRITE_ZEROES
                    };
                    r.request(0, kind, i, 0, 64 * MIB as u32);
                }
                for _ in 0..8 {
                    let mut h = [0u8; REPLY_LEN];
                    if r.s.read_exact(&mut h).is_err() {
                        return;
                    }
                }
            }
        }));
    }
    // Two: garbage, as a handshake and as requests.
    for k in 0..2u8 {
        threads.push(attacker(srv.addr.clone(), Arc::clone(&stop), move |addr| {
            let junk: Vec<u8> = (0..4096u32)
                .map(|i| (i * 131 + u32::from(k)) as u8)
                .collect();
            if k == 0 {
                if let Ok(mut s) = TcpStream::connect(addr) {
                    let _ = s.write_all(&junk);
                    let _ = closed_within(&mut s, Duration::from_secs(5));
                }
            } else if let Some(mut r) = raw_go(addr) {
                let _ = r.s.write_all(&junk);
                let _ = closed_within(&mut r.s, Duration::from_secs(5));
            }
        }));
    }
    // Let every attacker take its position, then measure over at least one idle timeout.
    thread::sleep(Duration::from_millis(300));
    // Two seconds: attackers time out and come back more than once meanwhile.
    let attacked = good_latency(&uri, ops, Duration::from_secs(2));
    stop.store(true, Ordering::SeqCst);
    let mut rounds = 0;
    for t in threads {
        rounds += t.join().unwrap();
    }
    let stats = srv.finish();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "good client, 4 KiB requests at depth 1 (3 reads : 1 write): alone {} requests, \
         p50 {:.3} ms p99 {:.3} ms max {:.3} ms; with 22 attackers {} requests, p50 {:.3} ms \
         p99 {:.3} ms max {:.3} ms ({rounds} attack rounds, {} timed out, {} evicted, {} refused)",
        alone.0,
        ms(alone.1),
        ms(alone.2),
        ms(alone.3),
        attacked.0,
        ms(attacked.1),
        ms(attacked.2),
        ms(attacked.3),
        stats.timed_out,
        stats.evicted,
        stats.refused,
    );
    assert!(mem.data.read().unwrap().iter().all(|&x| x != 0xee));
    // Generous bounds for a shared 2-core machine: what matters is that nothing waits for
    // an attacker's timeout (0.8 s) or a whole-export TRIM.
    assert!(
        attacked.2 < Duration::from_millis(150),
        "p99 {:?}",
        attacked.2
    );
    assert!(
        attacked.3 < Duration::from_millis(700),
        "max {:?}",
        attacked.3
    );
}
