//! Length-prefixed frames over turmoil TCP, which both systems' protocols travel in: a
//! `u32` big-endian body length, then the body, a postcard encoding of the message. A
//! system's own header (Kafka's correlation id, RocketMQ's opaque) is part of its message.

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest frame body accepted, in either direction. A Kafka fetch answers at most
/// `replica.fetch.max.bytes` (1 MiB by default) plus one oversized batch (the "at least
/// one batch" rule), a RocketMQ message is at most `maxMessageSize` (4 MiB); 8 MiB leaves
/// room for either without letting a corrupt length prefix make a reader allocate
/// gigabytes.
pub const MAX_FRAME_BYTES: usize = 8 * 1024 * 1024;

/// Length of the big-endian length prefix.
const LENGTH_PREFIX_BYTES: usize = 4;

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum NetError {
    #[error("request timed out")]
    Timeout,
    #[error("connection closed")]
    Disconnected,
    #[error("bad frame: {0}")]
    Codec(String),
    #[error("cannot connect: {0}")]
    Connect(String),
}

/// Encode `value` as one frame and write it with a single write (one TCP segment).
///
/// The body is sized first, so the frame is allocated once at its length instead of
/// growing (and copying) as postcard appends record batches to it.
pub async fn write_frame<W, T>(stream: &mut W, value: &T) -> Result<(), NetError>
where
    W: AsyncWrite + Unpin,
    T: Serialize,
{
    let codec = |e: postcard::Error| NetError::Codec(e.to_string());
    let body_bytes = postcard::experimental::serialized_size(value).map_err(codec)?;
    if body_bytes > MAX_FRAME_BYTES {
        return Err(NetError::Codec(format!(
            "frame of {body_bytes} bytes exceeds MAX_FRAME_BYTES ({MAX_FRAME_BYTES})"
        )));
    }
    let mut frame = Vec::with_capacity(LENGTH_PREFIX_BYTES + body_bytes);
    // Lossless: body_bytes ≤ MAX_FRAME_BYTES < u32::MAX.
    frame.extend_from_slice(&(body_bytes as u32).to_be_bytes());
    let frame = postcard::to_extend(value, frame).map_err(codec)?;
    debug_assert_eq!(frame.len(), LENGTH_PREFIX_BYTES + body_bytes);
    stream
        .write_all(&frame)
        .await
        .map_err(|_| NetError::Disconnected)
}

/// Read one frame and decode it. A length above [`MAX_FRAME_BYTES`] is rejected before
/// anything is allocated; the stream is then out of step and must be dropped.
pub async fn read_frame<R, T>(stream: &mut R) -> Result<T, NetError>
where
    R: AsyncRead + Unpin,
    T: DeserializeOwned,
{
    let mut prefix = [0u8; LENGTH_PREFIX_BYTES];
    stream
        .read_exact(&mut prefix)
        .await
        .map_err(|_| NetError::Disconnected)?;
    let body_bytes = u32::from_be_bytes(prefix) as usize;
    if body_bytes > MAX_FRAME_BYTES {
        return Err(NetError::Codec(format!(
            "frame of {body_bytes} bytes exceeds MAX_FRAME_BYTES ({MAX_FRAME_BYTES})"
        )));
    }
    let mut body = vec![0u8; body_bytes];
    stream
        .read_exact(&mut body)
        .await
        .map_err(|_| NetError::Disconnected)?;
    postcard::from_bytes(&body).map_err(|e| NetError::Codec(e.to_string()))
}
