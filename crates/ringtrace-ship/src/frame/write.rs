//! Writing a batch: a header, the names, then records appended one by one.

use super::layout::{
    checksum, pad8, Content, FrameError, TimeSource, COUNT_AT, CRC_AT, HEADER_LEN, MAGIC, MAX_HOST_LEN, MAX_RECORD_LEN,
    MAX_SOURCE_LEN, RECORDS_LEN_AT, RECORD_HEADER_LEN, TOO_LARGE, VERSION,
};
/// Builds one message: a header, the names, then records appended one by one.
#[derive(Clone, Debug)]
pub struct BatchWriter {
    buf: Vec<u8>,
    records_at: usize,
    first_seq: u64,
    count: u32,
}

impl BatchWriter {
    /// Starts a batch of `source`'s records on `host`, the first with sequence number
    /// `first_seq`. `offset_ns` is wall clock − source clock in ns, and must be 0 with
    /// [`TimeSource::Drained`].
    ///
    /// Errs with [`FrameError::TooLong`] if `host` is longer than [`MAX_HOST_LEN`] or
    /// `source` longer than [`MAX_SOURCE_LEN`] bytes, and with [`FrameError::Offset`] if
    /// drained times come with a nonzero offset.
    pub fn new(
        host: &str,
        source: &str,
        first_seq: u64,
        time_source: TimeSource,
        offset_ns: i64,
    ) -> Result<Self, FrameError> {
        let (host_len, source_len) =
            (name_len("host", host, MAX_HOST_LEN)?, name_len("source", source, MAX_SOURCE_LEN)?);
        if time_source == TimeSource::Drained && offset_ns != 0 {
            return Err(FrameError::Offset(offset_ns));
        }
        let records_at = HEADER_LEN + pad8(host.len() + source.len());
        let mut buf = Vec::with_capacity(records_at + 4096);
        buf.extend_from_slice(&MAGIC);
        buf.extend_from_slice(&1u16.to_le_bytes());
        buf.extend_from_slice(&(HEADER_LEN as u16).to_le_bytes());
        buf.extend_from_slice(&0u16.to_le_bytes());
        buf.extend_from_slice(&[time_source as u8, 0]);
        buf.extend_from_slice(&host_len.to_le_bytes());
        buf.extend_from_slice(&source_len.to_le_bytes());
        buf.extend_from_slice(&first_seq.to_le_bytes());
        buf.extend_from_slice(&offset_ns.to_le_bytes());
        // count, records_len and crc32c (filled in by `finish`), then the reserved zeros.
        buf.extend_from_slice(&[0; 16]);
        buf.extend_from_slice(host.as_bytes());
        buf.extend_from_slice(source.as_bytes());
        buf.resize(records_at, 0);
        Ok(Self { buf, records_at, first_seq, count: 0 })
    }

    /// Says what the batch's payloads are ([`Content`]): a batch of other content than
    /// plain records is written as version 2.
    pub fn with_content(mut self, content: Content) -> Self {
        let version = if content == Content::Records { 1 } else { VERSION };
        self.buf[4..6].copy_from_slice(&version.to_le_bytes());
        self.buf[11] = content as u8;
        self
    }

    /// Appends a record: `time_ns` is wall-clock ns since the Unix epoch.
    ///
    /// Errs with [`FrameError::TooLong`] if `payload` is longer than [`MAX_RECORD_LEN`]
    /// or the records would no longer fit the `u32` records length (start another
    /// batch), and with [`FrameError::SeqOverflow`] if the record's sequence number
    /// would leave no next one in a `u64`. The batch is unchanged when it errs.
    pub fn push(&mut self, time_ns: u64, payload: &[u8]) -> Result<(), FrameError> {
        self.append(time_ns, 0, payload)
    }

    /// Appends a [`TOO_LARGE`] marker in place of a record of `len` bytes that is not
    /// shipped; errs as [`push`](Self::push) does.
    pub fn push_too_large(&mut self, time_ns: u64, len: u64) -> Result<(), FrameError> {
        self.append(time_ns, TOO_LARGE, &len.to_le_bytes())
    }

    /// Bytes of a batch of `host` and `source` holding one record of `len` bytes.
    pub fn alone(host: &str, source: &str, len: usize) -> usize {
        HEADER_LEN + pad8(host.len() + source.len()) + RECORD_HEADER_LEN + pad8(len)
    }

    fn append(&mut self, time_ns: u64, flags: u32, payload: &[u8]) -> Result<(), FrameError> {
        let len = payload.len();
        if len > MAX_RECORD_LEN {
            return Err(FrameError::TooLong { what: "record payload", len, max: MAX_RECORD_LEN });
        }
        let records_len = (self.buf.len() - self.records_at) as u64 + (RECORD_HEADER_LEN + pad8(len)) as u64;
        if records_len > u64::from(u32::MAX) {
            let len = usize::try_from(records_len).unwrap_or(usize::MAX);
            return Err(FrameError::TooLong { what: "batch records", len, max: u32::MAX as usize });
        }
        let count = u64::from(self.count) + 1;
        if self.first_seq.checked_add(count).is_none() {
            return Err(FrameError::SeqOverflow { first_seq: self.first_seq, count });
        }
        self.buf.reserve(RECORD_HEADER_LEN + pad8(len));
        let mut head = [0u8; RECORD_HEADER_LEN];
        head[..4].copy_from_slice(&(len as u32).to_le_bytes());
        head[4..8].copy_from_slice(&flags.to_le_bytes());
        head[8..].copy_from_slice(&time_ns.to_le_bytes());
        self.buf.extend_from_slice(&head);
        self.buf.extend_from_slice(payload);
        self.buf.resize(self.buf.len() + (pad8(len) - len), 0);
        // Fits: at most u32::MAX / 16 records fit in the records length checked above.
        self.count += 1;
        Ok(())
    }

    /// Records appended so far.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Bytes of the message so far, header included.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether no record was appended (the message still has its header and names).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The sequence number the next record would have: `first_seq + count`.
    pub fn next_seq(&self) -> u64 {
        // Cannot overflow: `push` refuses a record that would leave no next number.
        self.first_seq.saturating_add(u64::from(self.count))
    }

    /// Fills in the count, the records length and the checksum, and returns the message.
    pub fn finish(mut self) -> Vec<u8> {
        let records_len = (self.buf.len() - self.records_at) as u32;
        self.buf[COUNT_AT..COUNT_AT + 4].copy_from_slice(&self.count.to_le_bytes());
        self.buf[RECORDS_LEN_AT..RECORDS_LEN_AT + 4].copy_from_slice(&records_len.to_le_bytes());
        let crc = checksum(&self.buf);
        self.buf[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        self.buf
    }
}

/// Checks a name's length and returns it as the header's `u16`.
fn name_len(what: &'static str, name: &str, max: usize) -> Result<u16, FrameError> {
    match u16::try_from(name.len()) {
        Ok(n) if name.len() <= max => Ok(n),
        _ => Err(FrameError::TooLong { what, len: name.len(), max }),
    }
}
