//! The Common Log Format reader on small hand-written logs.

use super::*;

const LOG: &str = "\
a.example - - [01/Jul/1995:00:00:01 -0400] \"GET /index.html HTTP/1.0\" 200 6245
b.example - - [01/Jul/1995:00:00:03 -0400] \"GET /img/logo.gif HTTP/1.0\" 200 9000
c.example - - [01/Jul/1995:00:00:04 -0400] \"GET /index.html HTTP/1.0\" 304 -
this line is not a log line
d.example - - [01/Jul/1995:00:00:09 -0400] \"GET /img/logo.gif\" 200 100 \"-\" \"agent\"

e.example - - [01/Jul/1995:00:00:10 -0400] \"GET /missing HTTP/1.0\" 404 320
";

fn drain(w: &mut WebLog<'_>) -> Vec<FileOp> {
    std::iter::from_fn(|| w.next_op().unwrap()).collect()
}

#[test]
fn parses_the_fields_and_the_time_zone() {
    let r = parse_line(LOG.lines().next().unwrap()).unwrap();
    assert_eq!(r.path, "/index.html");
    assert_eq!((r.status, r.bytes), (200, Some(6245)));
    // 1995-07-01 00:00:01 -0400 = 04:00:01 UTC; 1995-07-01 is day 9312 since the epoch.
    assert_eq!(r.time_s, 9312 * 86_400 + 4 * 3600 + 1);
    for bad in [
        "no brackets here \"GET / HTTP/1.0\" 200 1",
        "h - - [01/Jul/1995:00:00:01 -0400] GET / 200 1",
        "h - - [01/Jul/1995:00:00:01 -0400] \"GET / HTTP/1.0\" 2000 1",
        "h - - [01/Jul/1995:00:00:01 -0400] \"GET / HTTP/1.0\" 200 12x",
        "h - - [01/Xyz/1995:00:00:01 -0400] \"GET / HTTP/1.0\" 200 1",
        "h - - [01/Jul/1995:25:00:01 -0400] \"GET / HTTP/1.0\" 200 1",
        "h - - [01/Jul/1995:00:00:01] \"GET / HTTP/1.0\" 200 1",
        "h - - [01/Jul/1995:00:00:01 -0400] \"GET\" 200 1",
    ] {
        assert!(parse_line(bad).is_err(), "{bad}");
    }
}

#[test]
fn replays_data_requests_as_prefix_reads_and_counts_the_rest() {
    let mut w =
        WebLog::from_bytes("log", LOG.as_bytes(), OnMalformed::Skip, 1.0, 4096, false).unwrap();
    // Two files: /index.html 6245 B = 2 blocks, /img/logo.gif max(9000, 100) B = 3 blocks.
    assert_eq!(w.file_blocks(), [2, 3]);
    let ops = drain(&mut w);
    let got: Vec<(u64, u32, u32)> = ops
        .iter()
        .map(|o| (o.arrival_ns.unwrap() / 1_000_000_000, o.file, o.blocks))
        .collect();
    assert_eq!(got, [(0, 0, 2), (2, 1, 3), (8, 1, 1)]);
    // One malformed line (line 4); the 304 and the 404 move no data.
    assert_eq!(w.skipped(), (1, 2, Some(4)));
}

#[test]
fn fail_mode_names_the_line_and_warmup_reads_every_file_first() {
    let e = WebLog::from_bytes(
        "access.log",
        LOG.as_bytes(),
        OnMalformed::Fail,
        1.0,
        4096,
        true,
    )
    .err()
    .unwrap();
    assert_eq!(
        e.to_string(),
        Error::trace_line(
            "access.log",
            4,
            "malformed Common Log Format line: no [date]"
        )
        .to_string()
    );
    let mut w =
        WebLog::from_bytes("log", LOG.as_bytes(), OnMalformed::Skip, 0.5, 4096, true).unwrap();
    let ops = drain(&mut w);
    assert_eq!(ops.len(), 5);
    assert!(ops[0].warmup && ops[1].warmup && !ops[2].warmup);
    // Time scale 0.5 halves the gaps: the last request is at 4 s instead of 8 s.
    assert_eq!(ops[4].arrival_ns, Some(4_000_000_000));
}

#[test]
fn a_log_without_data_is_an_error() {
    let e = WebLog::from_bytes("x", b"garbage\n", OnMalformed::Skip, 1.0, 4096, true)
        .err()
        .unwrap();
    assert!(e.to_string().contains("no request returning data"), "{e}");
}
