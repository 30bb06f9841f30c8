//! Read and parse in one pass: batches of parsed Examples straight from TFRecord files.
//!
//! The general pipeline (`TFRecordDataset -> batch -> map(parse)`) allocates an element per record
//! and copies each record twice before parsing. This op parses each record from the reader's
//! buffer into the batch's output buffers as it is read: one copy of each value, no allocation
//! per record. Its state is the reader's position at a batch boundary: `{"file", "offset"}`.

use serde_json::{json, Value as Json};
use stokehold_core::dataset::{state_u64, DatasetIter, IterDataset};
use stokehold_core::{Dataset, Error, Example, Result};

use super::dataset::TFRecordDataset;
use super::example::parse::Parser;
use super::reader::RecordReader;

/// Parsed batches of the records of a [`TFRecordDataset`].
pub struct ParsedBatches {
    src: TFRecordDataset,
    parser: Parser,
    size: usize,
    drop_remainder: bool,
}

impl TFRecordDataset {
    /// Batches of `size` records parsed with `parser` (the last batch may be smaller unless
    /// `drop_remainder`): the same elements as `batch(size)` then `map(parser.batch_fn)`, faster.
    pub fn parse_batches(
        &self,
        parser: Parser,
        size: usize,
        drop_remainder: bool,
    ) -> Result<Dataset> {
        if size == 0 {
            return Err(Error::invalid("batch size must be > 0"));
        }
        Ok(Dataset::from_iter(ParsedBatches {
            src: self.clone(),
            parser,
            size,
            drop_remainder,
        }))
    }
}

impl IterDataset for ParsedBatches {
    fn iter(&self, _epoch: u64) -> Result<Box<dyn DatasetIter>> {
        Ok(Box::new(ParsedIter {
            src: self.src.clone(),
            parser: self.parser.clone(),
            size: self.size,
            drop_remainder: self.drop_remainder,
            file: 0,
            reader: None,
        }))
    }

    fn name(&self) -> String {
        format!(
            "{} -> parse_batches({}, drop_remainder={}, [{}])",
            IterDataset::name(&self.src),
            self.size,
            self.drop_remainder,
            self.parser.spec().describe()
        )
    }

    /// The reader's log: the records skipped under it are this op's.
    fn error_log(&self) -> Option<std::sync::Arc<stokehold_core::skip::ErrorLog>> {
        Some(self.src.log().clone())
    }
}

struct ParsedIter {
    src: TFRecordDataset,
    parser: Parser,
    size: usize,
    drop_remainder: bool,
    file: usize,
    reader: Option<RecordReader>,
}

impl DatasetIter for ParsedIter {
    /// The next batch. A record that does not parse fails its batch, but only once the batch
    /// is complete: a last, partial batch that `drop_remainder` drops is never parsed to the end,
    /// so a bad record in it raises nothing (tf.data parses only the batches it yields).
    fn next(&mut self) -> Result<Option<Example>> {
        let mut b = self.parser.builder(self.size);
        let (mut count, mut failed) = (0, None);
        while count < self.size {
            if self.reader.is_none() {
                if self.file >= self.src.files().len() {
                    break;
                }
                self.reader = Some(self.src.open_reader(self.file, 0)?);
            }
            let r = self.reader.as_mut().expect("opened above");
            match r.next_ref()? {
                Some((offset, rec)) => {
                    count += 1;
                    if failed.is_none() {
                        if let Err(e) = b.push(rec) {
                            let path = self.src.files()[self.file].display();
                            failed = Some(Error::schema(
                                "parse_batches",
                                format!("{path}: record at offset {offset}: {e}"),
                            ));
                        }
                    }
                }
                None => {
                    self.reader = None;
                    self.file += 1;
                }
            }
        }
        if count == 0 || (self.drop_remainder && count < self.size) {
            return Ok(None);
        }
        match failed {
            Some(e) => Err(e),
            None => b.finish().map(Some),
        }
    }

    fn state(&self) -> Json {
        json!({ "file": self.file, "offset": self.reader.as_ref().map_or(0, |r| r.offset()) })
    }

    fn set_state(&mut self, state: &Json) -> Result<()> {
        let file = state_u64(state, "file")? as usize;
        let offset = state_u64(state, "offset")?;
        if file > self.src.files().len() {
            return Err(Error::State(format!(
                "parse_batches: file {file} out of range"
            )));
        }
        self.file = file;
        self.reader = None;
        if file < self.src.files().len() {
            self.reader = Some(self.src.open_reader(file, offset)?);
        }
        Ok(())
    }
}
