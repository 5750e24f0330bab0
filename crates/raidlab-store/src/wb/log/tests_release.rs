//! Released images: named by a release entry in a later batch header (no data block), and
//! pinning their segment while live.

use super::super::backup::Backup;
use super::super::format::SUPERS_BYTES;
use super::tests::{header_at, image, page, physical, seqs, Cache, SEG, UUID};
use super::*;

#[test]
fn released_images_are_named_by_a_durable_release_entry() {
    let (_, legs) = physical(8);
    let log = LogBackup::create(legs.clone(), UUID, SEG, 8).unwrap();
    let mut cache = Cache::default();
    cache.write(&log, 1, 1).unwrap();
    let written = log.put(image(4, 2), &page(4, 0), &cache).unwrap();
    log.commit().unwrap();
    // One still in the staged batch, one written.
    let staged = log.put(image(5, 3), &page(5, 0), &cache).unwrap();
    assert_eq!(seqs(&log.scan().unwrap()), vec![(1, 1), (4, 2)]);
    log.release_images(&[written, staged]).unwrap();
    cache.write(&log, 1, 4).unwrap();
    log.commit().unwrap();
    for scan in [
        log.scan().unwrap(),
        LogBackup::open(legs.clone(), UUID).unwrap().scan().unwrap(),
    ] {
        // The staged image was voided in the buffer, the written one named by a release.
        assert_eq!(
            (seqs(&scan), scan.torn, scan.released),
            (vec![(1, 1), (1, 4)], 0, 1)
        );
    }
    let st = log.stats();
    assert_eq!(
        (
            st.live,
            st.images_released,
            st.release_entries,
            st.image_void_leg_writes
        ),
        (2, 2, 1, 0)
    );
    // Batch 1 at 0 (page 1, the image at 8192) leaves one block of its 16 KiB segment, so
    // batch 2 starts the next: the staged image, the release entry (no data block), page 1;
    // it ends at 28672, one block short of its segment, so the next batch starts the next.
    let b = header_at(&log, 0, SUPERS_BYTES + 16384, 16384).unwrap();
    assert_eq!(
        (b.records.len(), b.released, b.next),
        (2, vec![8192], 32768)
    );
    assert_eq!(log.lock().head, 32768);
}

#[test]
fn a_live_image_pins_its_segment_until_released() {
    let (_, legs) = physical(8);
    let log = LogBackup::create(legs, UUID, SEG, 8).unwrap();
    let mut cache = Cache::default();
    let h = log.put(image(4, 1), &page(4, 0), &cache).unwrap();
    log.commit().unwrap();
    let mut prev = None;
    let mut failed = None;
    for i in 0..16 {
        match cache.write(&log, 10, 2 + i) {
            Ok(h) => {
                log.commit().unwrap();
                if let Some(p) = prev.replace(h) {
                    log.release(p, true);
                }
            }
            Err(e) => {
                failed = Some((i, e.to_string()));
                break;
            }
        }
    }
    // Image at 0 and hot versions at 8 KiB steps: the 16th would need segment 8 = 0.
    let (i, e) = failed.unwrap();
    assert!(i == 15 && e.contains("cannot make room"), "{i}: {e}");
    log.release_images(&[h]).unwrap();
    let h = cache.write(&log, 10, 100).unwrap();
    log.commit().unwrap();
    log.release(prev.unwrap(), true);
    log.release(h, false);
    assert_eq!(log.stats().live, 0);
}
