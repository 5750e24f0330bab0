//! Parsing, handshakes, commands and bad requests.

use super::*;

#[test]
fn listen_and_uri_parsing() {
    assert_eq!(
        Listen::parse("127.0.0.1:10809"),
        Ok(Listen::Tcp("127.0.0.1:10809".parse().unwrap()))
    );
    assert_eq!(
        Listen::parse("[::1]:0"),
        Ok(Listen::Tcp("[::1]:0".parse().unwrap()))
    );
    assert_eq!(
        Listen::parse("unix:/x/sock"),
        Ok(Listen::Unix(PathBuf::from("/x/sock")))
    );
    assert!(Listen::parse("unix:").is_err());
    assert!(Listen::parse("localhost").is_err());
    use client::{parse_uri, Target};
    let tcp = |a: &str| Target::Tcp(a.to_string());
    assert_eq!(parse_uri("nbd://h:1/e").unwrap(), (tcp("h:1"), "e".into()));
    assert_eq!(parse_uri("nbd://h").unwrap(), (tcp("h:10809"), "".into()));
    assert_eq!(
        parse_uri("nbd://[::1]").unwrap(),
        (tcp("[::1]:10809"), "".into())
    );
    assert_eq!(
        parse_uri("nbd://[::1]:5/a%20b").unwrap(),
        (tcp("[::1]:5"), "a b".into())
    );
    assert_eq!(
        parse_uri("nbd+unix:///ex?socket=/t/s").unwrap(),
        (Target::Unix("/t/s".into()), "ex".into())
    );
    for bad in [
        "http://x",
        "nbd://",
        "nbd+unix://x/e?socket=/s",
        "nbd+unix:///e",
        "nbd://h/%zz",
    ] {
        assert!(parse_uri(bad).is_err(), "{bad}");
    }
}

#[test]
fn decide_checks_requests() {
    let ex = ExportInfo {
        name: "a".into(),
        description: String::new(),
        size: 1 << 20,
        flags: ExportInfo::flags_for(false, true),
        block: BlockSize {
            minimum: 4096,
            preferred: 4096,
            maximum: 65536,
        },
    };
    let req = |flags, kind, offset, len| Request {
        flags,
        kind,
        cookie: 7,
        offset,
        len,
    };
    let d = |r: Request| decide(&r, &ex);
    assert_eq!(d(req(0, CMD_READ, 0, 4096)), Decision::Run(Command::Read));
    assert_eq!(
        d(req(1, CMD_WRITE, 4096, 4096)),
        Decision::Run(Command::Write { fua: true })
    );
    assert_eq!(
        d(req(3, CMD_WRITE_ZEROES, 0, 1 << 20)),
        Decision::Run(Command::WriteZeroes { fua: true })
    );
    assert_eq!(
        d(req(0, CMD_TRIM, 0, 1 << 20)),
        Decision::Run(Command::Trim { fua: false })
    );
    assert_eq!(d(req(1, CMD_FLUSH, 0, 0)), Decision::Run(Command::Flush));
    assert_eq!(d(req(0, CMD_DISC, 0, 0)), Decision::Disconnect);
    assert_eq!(d(req(0, CMD_READ, 0, 0)), Decision::Done);
    assert_eq!(d(req(0, 99, 0, 4096)), Decision::Reject(EINVAL));
    assert_eq!(d(req(0, 5, 0, 4096)), Decision::Reject(EINVAL)); // CACHE: not offered
    assert_eq!(d(req(2, CMD_WRITE, 0, 4096)), Decision::Reject(EINVAL)); // NO_HOLE on WRITE
    assert_eq!(
        d(req(1 << 4, CMD_WRITE_ZEROES, 0, 4096)),
        Decision::Reject(EINVAL)
    ); // FAST_ZERO
    assert_eq!(d(req(0, CMD_READ, 512, 4096)), Decision::Reject(EINVAL));
    assert_eq!(d(req(0, CMD_WRITE, 0, 512)), Decision::Reject(EINVAL));
    assert_eq!(
        d(req(0, CMD_READ, 0, 65536 + 4096)),
        Decision::Reject(EINVAL)
    );
    assert_eq!(d(req(0, CMD_READ, 1 << 20, 4096)), Decision::Reject(EINVAL));
    assert_eq!(d(req(0, CMD_TRIM, 1 << 20, 4096)), Decision::Reject(EINVAL));
    assert_eq!(
        d(req(0, CMD_WRITE, 1 << 20, 4096)),
        Decision::Reject(ENOSPC)
    );
    assert_eq!(
        d(req(0, CMD_WRITE_ZEROES, 1 << 20, 4096)),
        Decision::Reject(ENOSPC)
    );
    assert_eq!(
        d(req(0, CMD_READ, u64::MAX - 4095, 8192)),
        Decision::Reject(EINVAL)
    );
    let ro = ExportInfo {
        flags: ExportInfo::flags_for(true, false),
        ..ex.clone()
    };
    assert_eq!(
        decide(&req(0, CMD_WRITE, 0, 4096), &ro),
        Decision::Reject(EPERM)
    );
    assert_eq!(
        decide(&req(0, CMD_TRIM, 0, 4096), &ro),
        Decision::Reject(EPERM)
    );
    assert_eq!(
        decide(&req(0, CMD_READ, 0, 4096), &ro),
        Decision::Run(Command::Read)
    );
    assert_eq!(
        parse_request(&req(0, CMD_READ, 0, 1).encode()),
        Some(req(0, CMD_READ, 0, 1))
    );
    let mut bad = req(0, CMD_READ, 0, 1).encode();
    bad[0] ^= 1;
    assert_eq!(parse_request(&bad), None);
    assert_eq!(
        parse_info_request(&info_data("ab", &[3, 1])),
        Some((&b"ab"[..], &[0, 3, 0, 1][..]))
    );
    assert_eq!(parse_info_request(&[0, 0, 0, 9, 1]), None);
    assert_eq!(parse_info_request(&[0, 0, 0, 0, 0, 1]), None);
}

#[test]
fn go_by_both_names_and_unix_socket() {
    let mem = Arc::new(Mem::new(8 * MIB));
    let srv = Running::start(Arc::clone(&mem));
    for uri in [srv.uri(), format!("{}/mem0", srv.uri())] {
        let c = Client::connect(&uri).unwrap();
        assert_eq!(c.size_bytes(), 8 * MIB as u64);
        assert_eq!(c.block_size(), mem.block);
        let f = c.transmission_flags();
        let want = FLAG_HAS_FLAGS
            | FLAG_SEND_FLUSH
            | FLAG_SEND_FUA
            | FLAG_SEND_TRIM
            | FLAG_SEND_WRITE_ZEROES
            | FLAG_CAN_MULTI_CONN;
        assert_eq!(f, want);
        c.disconnect().unwrap();
    }
    let err = Client::connect(&format!("{}/nope", srv.uri()))
        .err()
        .unwrap();
    assert!(err.to_string().contains("nope"), "{err}");
    let stats = srv.finish();
    assert_eq!(stats.connections, 3);

    let dir = std::env::temp_dir().join(format!("raidlab-nbd-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("s");
    let srv = Running::start_on(&Listen::Unix(sock.clone()), Arc::clone(&mem), None);
    assert_eq!(srv.addr, format!("unix:{}", sock.display()));
    let mut c = Client::connect(&format!("nbd+unix:///mem0?socket={}", sock.display())).unwrap();
    c.write(0, &[7; 4096], false).unwrap();
    let mut b = [0u8; 4096];
    c.read(0, &mut b).unwrap();
    assert_eq!(b, [7; 4096]);
    c.disconnect().unwrap();
    srv.finish();
    assert!(!sock.exists(), "socket file left behind");
    let _ = std::fs::remove_dir(&dir);
}

#[test]
fn handshake_variants() {
    let mem = Arc::new(Mem::new(MIB));
    let srv = Running::start(Arc::clone(&mem));
    let both = FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES;

    // INFO with every information type, then GO, then a request.
    let mut r = Raw::connect(&srv.addr, both);
    r.option(
        OPT_INFO,
        &info_data("", &[INFO_NAME, INFO_DESCRIPTION, INFO_BLOCK_SIZE]),
    );
    let mut seen = HashSet::new();
    loop {
        let (opt, rep, d) = r.reply();
        assert_eq!(opt, OPT_INFO);
        if rep == REP_ACK {
            break;
        }
        assert_eq!(rep, REP_INFO);
        let t = u16::from_be_bytes([d[0], d[1]]);
        match t {
            INFO_EXPORT => assert_eq!(u64::from_be_bytes(d[2..10].try_into().unwrap()), MIB as u64),
            INFO_NAME => assert_eq!(&d[2..], b"mem0"),
            INFO_DESCRIPTION => assert_eq!(&d[2..], b"in-memory test export"),
            INFO_BLOCK_SIZE => assert_eq!(d[2..], [0, 0, 16, 0, 0, 1, 0, 0, 0, 64, 0, 0]),
            _ => panic!("unexpected info {t}"),
        }
        assert!(seen.insert(t));
    }
    assert_eq!(seen.len(), 4);
    r.go("mem0", &[INFO_BLOCK_SIZE]);
    r.request(0, CMD_READ, 5, 0, 4096);
    assert_eq!(r.simple_reply(), (Errno(0), 5));

    // LIST (and LIST with data), unknown export, unsupported options, oversized option; the
    // session carries on after each.
    let mut r = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE);
    r.option(OPT_LIST, &[]);
    let (_, rep, d) = r.reply();
    assert_eq!(
        (rep, &d[..]),
        (REP_SERVER, &[0, 0, 0, 4, b'm', b'e', b'm', b'0'][..])
    );
    assert_eq!(r.reply().1, REP_ACK);
    r.option(OPT_LIST, b"x");
    assert_eq!(r.reply().1, REP_ERR_INVALID);
    r.option(OPT_GO, &info_data("other", &[]));
    assert_eq!(r.reply().1, REP_ERR_UNKNOWN);
    r.option(OPT_GO, &[0, 0, 0, 9, 0]);
    assert_eq!(r.reply().1, REP_ERR_INVALID);
    for opt in [OPT_STARTTLS, OPT_STRUCTURED_REPLY, 9, 10, 11, 4, 12345] {
        r.option(opt, &[]);
        assert_eq!(r.reply(), (opt, REP_ERR_UNSUP, vec![]));
    }
    r.option(OPT_INFO, &vec![0u8; MAX_OPTION_LEN as usize + 1]);
    assert_eq!(r.reply().1, REP_ERR_TOO_BIG);
    r.option(OPT_GO, &vec![1u8; 4 * MIB]);
    assert_eq!(r.reply().1, REP_ERR_TOO_BIG);
    // The export's minimum block is 4096: GO without asking for the block sizes is refused
    // (nothing but the error is sent), and the client may ask again.
    r.option(OPT_GO, &info_data("", &[INFO_NAME]));
    let (opt, rep, msg) = r.reply();
    assert_eq!((opt, rep), (OPT_GO, REP_ERR_BLOCK_SIZE_REQD));
    assert!(String::from_utf8_lossy(&msg).contains("NBD_INFO_BLOCK_SIZE"));
    r.go("", &[INFO_BLOCK_SIZE]);
    r.request(0, CMD_FLUSH, 9, 0, 0);
    assert_eq!(r.simple_reply(), (Errno(0), 9));

    // ABORT is acknowledged, then the server hangs up.
    let mut r = Raw::connect(&srv.addr, both);
    r.option(OPT_ABORT, &[]);
    assert_eq!(r.reply(), (OPT_ABORT, REP_ACK, vec![]));
    assert!(r.closed());

    // EXPORT_NAME, with and without the 124 zeroes.
    for (flags, tail) in [(both, 0), (FLAG_C_FIXED_NEWSTYLE, 124), (0, 124)] {
        let mut r = Raw::connect(&srv.addr, flags);
        r.option(OPT_EXPORT_NAME, b"mem0");
        let mut b = vec![0u8; 10 + tail];
        r.s.read_exact(&mut b).unwrap();
        assert_eq!(u64::from_be_bytes(b[..8].try_into().unwrap()), MIB as u64);
        assert!(b[10..].iter().all(|&x| x == 0));
        r.request(0, CMD_READ, 3, 0, 4096);
        assert_eq!(r.simple_reply(), (Errno(0), 3));
        let mut data = [1u8; 4096];
        r.s.read_exact(&mut data).unwrap();
        assert_eq!(data, [0; 4096]);
    }

    // An unknown EXPORT_NAME, unknown client flags, a bad option magic: closed.
    let mut r = Raw::connect(&srv.addr, both);
    r.option(OPT_EXPORT_NAME, b"nope");
    assert!(r.closed());
    let mut r = Raw::connect(&srv.addr, 1 << 5);
    assert!(r.closed());
    let mut r = Raw::connect(&srv.addr, both);
    r.s.write_all(&[0u8; 16]).unwrap();
    assert!(r.closed());
    // A client vanishing in the middle of an option, and in the middle of the flags.
    let mut r = Raw::connect(&srv.addr, both);
    r.s.write_all(&IHAVEOPT.to_be_bytes()).unwrap();
    drop(r);
    let mut s = TcpStream::connect(&srv.addr).unwrap();
    s.write_all(&[0, 0]).unwrap();
    drop(s);

    let mut c = Client::connect(&srv.uri()).unwrap();
    c.flush().unwrap();
    c.disconnect().unwrap();
    srv.finish();
}

#[test]
fn commands_and_fua() {
    let mem = Arc::new(Mem::new(4 * MIB));
    let srv = Running::start(Arc::clone(&mem));
    let mut c = Client::connect(&srv.uri()).unwrap();
    let data = pattern(1, 64 << 10);
    c.write(8192, &data, false).unwrap();
    c.write(MIB as u64, &data, true).unwrap();
    let mut back = vec![0u8; 64 << 10];
    c.read(8192, &mut back).unwrap();
    assert_eq!(back, data);
    assert_eq!(&mem.data.read().unwrap()[MIB..MIB + data.len()], &data[..]);
    c.flush().unwrap();
    assert_eq!(mem.flushes.load(Ordering::SeqCst), 1);
    c.write_zeroes(8192, 4096, false).unwrap();
    c.trim(12288, 8192, true).unwrap();
    // NO_HOLE is accepted on WRITE_ZEROES.
    let h = c
        .submit_raw(
            CMD_FLAG_NO_HOLE | CMD_FLAG_FUA,
            CMD_WRITE_ZEROES,
            MIB as u64,
            4096,
            &[],
        )
        .unwrap();
    let done = c.wait_any().unwrap();
    assert_eq!((done.handle, done.result), (h, Ok(())));
    assert_eq!(mem.fua.load(Ordering::SeqCst), 3);
    c.read(8192, &mut back).unwrap();
    assert!(back[..12288].iter().all(|&b| b == 0));
    assert_eq!(back[12288..], data[12288..]);
    // Whole export in 4 MiB (maximum) pieces.
    let mut whole = vec![0u8; 4 * MIB];
    c.read(0, &mut whole).unwrap();
    assert_eq!(&whole[..], &mem.data.read().unwrap()[..]);
    c.disconnect().unwrap();
    let stats = srv.finish();
    assert_eq!(stats.errors, 0);
    assert_eq!(stats.bytes_written, 2 * data.len() as u64);
}

#[test]
fn bad_requests_get_errors_and_the_connection_lives() {
    let mut m = Mem::new(MIB);
    m.block.maximum = 64 << 10;
    let mem = Arc::new(m);
    mem.fill(0, 4096, 0xab);
    let srv = Running::start(Arc::clone(&mem));
    let mut c = Client::connect(&srv.uri()).unwrap();
    let end = MIB as u64;
    let cases: Vec<(u16, u16, u64, u32, Errno)> = vec![
        (0, 99, 0, 4096, EINVAL),         // unknown command
        (0, 5, 0, 4096, EINVAL),          // CACHE, not advertised
        (0, CMD_READ, end, 4096, EINVAL), // past the end
        (0, CMD_TRIM, end - 4096, 8192, EINVAL),
        (0, CMD_WRITE, end, 4096, ENOSPC), // write past the end (payload discarded)
        (0, CMD_WRITE_ZEROES, end, 4096, ENOSPC),
        (0, CMD_READ, u64::MAX - 4095, 4096, EINVAL),
        (0, CMD_READ, 512, 4096, EINVAL),     // misaligned offset
        (0, CMD_READ, 0, 1000, EINVAL),       // misaligned length
        (0, CMD_WRITE, 0, 6000, EINVAL),      // misaligned write (payload discarded)
        (0, CMD_READ, 0, 128 << 10, EINVAL),  // beyond the maximum
        (0, CMD_WRITE, 0, 128 << 10, EINVAL), // beyond the maximum (payload discarded)
        (CMD_FLAG_NO_HOLE, CMD_WRITE, 0, 4096, EINVAL), // flag not valid for WRITE
        (1 << 7, CMD_READ, 0, 4096, EINVAL),  // unknown flag
        (1 << 2, CMD_READ, 0, 4096, EINVAL),  // DF without structured replies
    ];
    for (flags, kind, offset, len, want) in cases {
        let payload = if kind == CMD_WRITE {
            pattern(3, len as usize)
        } else {
            vec![]
        };
        let h = c.submit_raw(flags, kind, offset, len, &payload).unwrap();
        let done = c.wait_any().unwrap();
        assert_eq!(
            (done.handle, done.result),
            (h, Err(want)),
            "{kind} {flags:#x} {offset} {len}"
        );
        let mut b = [0u8; 4096];
        c.read(0, &mut b).unwrap();
        assert_eq!(b, [0xab; 4096], "after {kind} {flags:#x} {offset} {len}");
    }
    // Zero-length requests succeed without touching anything.
    c.write(0, &[], false).unwrap();
    c.read(0, &mut []).unwrap();
    // A maximal write and read still work.
    c.write(0, &vec![0xcd; 64 << 10], false).unwrap();
    assert_eq!(mem.data.read().unwrap()[65535], 0xcd);
    c.disconnect().unwrap();

    let mut ro = Mem::new(MIB);
    ro.read_only = true;
    let srv2 = Running::start(Arc::new(ro));
    let mut c = Client::connect(&srv2.uri()).unwrap();
    assert_ne!(c.transmission_flags() & FLAG_READ_ONLY, 0);
    assert_eq!(
        c.transmission_flags() & FLAG_CAN_MULTI_CONN,
        FLAG_CAN_MULTI_CONN
    );
    assert_eq!(server_errno(c.write(0, &[1; 4096], false)), EPERM);
    assert_eq!(server_errno(c.trim(0, 4096, false)), EPERM);
    assert_eq!(server_errno(c.write_zeroes(0, 4096, false)), EPERM);
    c.read(0, &mut [0u8; 4096]).unwrap();
    c.disconnect().unwrap();
    srv2.finish();
    let stats = srv.finish();
    assert!(stats.errors >= 15);
}
