//! A batch appended with `append_checked` keeps its caller's bytes: stamped apart (a copy of its
//! first bytes), never changed, and read back the same from the tail cache and the files.

use bytes::Bytes;

use super::tests::{batch, read_all, small_config};
use super::*;
use crate::test_util::run;

#[test]
fn a_kept_batch_is_stamped_apart_and_reads_the_same_from_the_tail_and_the_file() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = PartitionLog::open(dir.path(), small_config())
            .await
            .unwrap();
        log.append(batch(2, 0, 10), 5, 0).await.unwrap();
        // A request frame's slice, as the broker's produce path passes it.
        let frame = batch(3, 1, 20).freeze();
        let sent = frame.clone();
        let checked = crate::batch::Checked::first_of(&frame, 4096).unwrap();
        let info = log.append_checked(checked, 5, 0).await.unwrap();
        assert_eq!((info.base_offset, info.log_end_offset), (2, 5));
        assert_eq!(frame, sent, "the caller's bytes are never changed");
        assert_eq!(
            crate::batch::BatchHeader::parse(&frame)
                .unwrap()
                .base_offset,
            0
        );
        // From the tail: the stamped head, then the body as it came (the caller's memory).
        let tail = log.read(2, 1 << 20, u64::MAX).await.unwrap();
        assert_eq!(tail.next_offset, 5);
        let pieces: Vec<Bytes> = tail
            .chunks
            .iter()
            .map(|c| match c {
                ReadChunk::Memory(b) => b.clone(),
                other => panic!("the tail answers from memory, not {other:?}"),
            })
            .collect();
        assert_eq!(pieces.len(), 2, "head and body");
        let at = crate::batch::STAMPED_HEAD_BYTES;
        assert_eq!(pieces[0].len(), at);
        assert_eq!(
            pieces[1].as_ptr(),
            frame[at..].as_ptr(),
            "the body is not a copy"
        );
        let joined = pieces.concat();
        let h = crate::batch::validate(&joined, 4096).expect("the CRC still holds");
        assert_eq!((h.base_offset, h.partition_leader_epoch), (2, 5));
        assert_eq!(&joined[at..], &frame[at..]);
        // From the file, after a restart: the same bytes.
        log.close().await.unwrap();
        let (log, _) = PartitionLog::open(dir.path(), small_config())
            .await
            .unwrap();
        let stored = log.read_copy(2, 4096, u64::MAX).await.unwrap();
        assert_eq!(&stored[..], &joined[..]);
        assert_eq!(read_all(&log, 0).await.len(), 5);
    });
}
