//! Tests of the control socket: bad requests, idle connections, requests in pieces.
use super::*;

use crate::ctrl::tests::{controller, mem_members, shape};
use raidlab::array::Level;

/// A scratch directory, a RAID-5 of 4 in memory, the stop flag and the bound socket.
fn rig(tag: &str) -> (PathBuf, Arc<Controller>, Arc<AtomicBool>, UnixListener) {
    let dir = std::env::temp_dir().join(format!("raidlab-ctl-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sh = shape(Level::Raid5, 4, 4);
    let m = mem_members(&sh, "d", 4);
    let (c, _) = controller(&sh, &m, Default::default());
    let listener = bind(&dir).unwrap();
    (dir, Arc::new(c), Arc::new(AtomicBool::new(false)), listener)
}

/// Idle connections are closed, so eight silent clients cannot hold every slot.
#[test]
fn idle_connections_are_closed_and_free_their_slots() {
    let (dir, ctl, stop, listener) = rig("idle");
    let served = Arc::new(Served {
        idle_max: Some(Duration::from_millis(600)),
        ..Default::default()
    });
    let t = {
        let (dir, ctl, stop) = (dir.clone(), ctl.clone(), stop.clone());
        std::thread::spawn(move || run(listener, dir, ctl, stop, served))
    };
    let silent: Vec<UnixStream> = (0..CONNECTIONS_MAX)
        .map(|_| UnixStream::connect(socket_path(&dir)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let r = request(&dir, &json!({"cmd": "status"})).unwrap();
    assert_eq!(r["error"], "too many control connections", "{r}");
    // Each silent one is told why and closed; then a client gets in again.
    for s in silent {
        let mut l = String::new();
        BufReader::new(s).read_line(&mut l).unwrap();
        assert!(l.contains("no request for"), "{l}");
    }
    let r = request(&dir, &json!({"cmd": "status"})).unwrap();
    assert_eq!(r["state"], "active", "{r}");
    stop.store(true, Ordering::SeqCst);
    t.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_requests_get_error_replies_and_the_socket_keeps_serving() {
    let (dir, ctl, stop, listener) = rig("bad");
    assert!(
        bind(&dir).is_err(),
        "a second server on the same directory is refused"
    );
    let t = {
        let (dir, ctl, stop) = (dir.clone(), ctl.clone(), stop.clone());
        std::thread::spawn(move || run(listener, dir, ctl, stop, Default::default()))
    };
    let ask = |v: Value| request(&dir, &v).unwrap();
    assert_eq!(ask(json!({"cmd": "status"}))["state"], "active");
    for (req, says) in [
        (json!({"cmd": "fail", "slot": 9}), "out of range"),
        (json!({"cmd": "fail"}), "expected a slot"),
        (
            json!({"cmd": "remove", "target": "nothing"}),
            "neither a spare",
        ),
        (json!({"cmd": "reshape"}), "unknown command"),
        (json!({"nope": 1}), "expected {\"cmd\""),
        (
            json!({"cmd": "add-spare", "path": "no/such/file"}),
            "no/such/file",
        ),
    ] {
        let r = ask(req.clone());
        assert_eq!(r["ok"], false, "{req}");
        assert!(r["error"].as_str().unwrap().contains(says), "{req}: {r}");
    }
    // Not JSON at all, on a raw connection: an error line, and the connection goes on.
    let mut s = UnixStream::connect(socket_path(&dir)).unwrap();
    writeln!(s, "status please").unwrap();
    writeln!(s, "{}", json!({"cmd": "check"})).unwrap();
    let mut lines = BufReader::new(s).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert!(first["error"]
        .as_str()
        .unwrap()
        .contains("not a JSON request"));
    let second: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(
        (second["ok"].as_bool(), second["mismatches"].as_u64()),
        (Some(true), Some(0))
    );
    assert_eq!(ask(json!({"cmd": "fail", "slot": 1}))["state"], "degraded");
    // A request sent in pieces, with pauses longer than the read timeout, is one request.
    let mut s = UnixStream::connect(socket_path(&dir)).unwrap();
    s.write_all(br#"{"cmd": "#).unwrap();
    std::thread::sleep(Duration::from_millis(450));
    s.write_all(b"\"status\"}\n").unwrap();
    let mut lines = BufReader::new(s).lines();
    let r: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(r["state"], "degraded", "{r}");
    stop.store(true, Ordering::SeqCst);
    t.join().unwrap();
    assert!(
        !socket_path(&dir).exists(),
        "the socket file goes with the server"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
