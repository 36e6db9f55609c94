//! Telemetry columns as one Parquet file, the format analytics tools
//! (DuckDB, Spark, pandas) read without convoy. Columns: `t_ns`
//! (timestamp, ns, UTC), `path` (the VSS name, dictionary-encoded by
//! the writer), `value` (numbers and booleans as 0/1) and `text`.
//!
//! Column chunks are zstd-compressed from [`COMPRESS_FROM_ROWS`] rows on.
//! Most segments are far smaller (a 1 Hz position fix is three rows), and
//! for those the writer's codec costs more than it saves: it makes a
//! zstd compression and decompression context for every column of every
//! file, which took 7.7 % of the server's CPU when 10,000 vehicles sent a
//! segment a second (docs/NET.md), to shrink chunks of tens of bytes that
//! the file's own metadata outweighs. Readers take either codec per chunk.

use std::sync::Arc;

use arrow_array::types::UInt32Type;
use arrow_array::{
    ArrayRef, DictionaryArray, Float64Array, RecordBatch, StringArray, TimestampNanosecondArray,
    UInt32Array,
};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::extract::Columns;

pub fn schema() -> Schema {
    Schema::new(vec![
        Field::new(
            "t_ns",
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            false,
        ),
        Field::new(
            "path",
            DataType::Dictionary(Box::new(DataType::UInt32), Box::new(DataType::Utf8)),
            false,
        ),
        Field::new("value", DataType::Float64, true),
        Field::new("text", DataType::Utf8, true),
    ])
}

/// Rows from which column chunks are compressed: at 20-odd bytes a row
/// (timestamp, dictionary key, value), about 20 KiB of column data.
pub const COMPRESS_FROM_ROWS: usize = 1024;

fn compression_for(rows: usize) -> Result<Compression, parquet::errors::ParquetError> {
    Ok(if rows >= COMPRESS_FROM_ROWS {
        Compression::ZSTD(ZstdLevel::try_new(3)?)
    } else {
        Compression::UNCOMPRESSED
    })
}

/// Encodes the columns as a Parquet file in memory.
pub fn to_parquet(c: Columns) -> Result<Vec<u8>, parquet::errors::ParquetError> {
    let compression = compression_for(c.t_ns.len())?;
    let schema = Arc::new(schema());
    let cols: Vec<ArrayRef> = vec![
        Arc::new(TimestampNanosecondArray::from(c.t_ns).with_timezone("UTC")),
        Arc::new(DictionaryArray::<UInt32Type>::try_new(
            UInt32Array::from(c.path),
            Arc::new(StringArray::from(c.paths)),
        )?),
        Arc::new(Float64Array::from(c.value)),
        Arc::new(StringArray::from(c.text)),
    ];
    let batch = RecordBatch::try_new(schema.clone(), cols)?;
    let props = WriterProperties::builder()
        .set_compression(compression)
        .build();
    let mut w = ArrowWriter::try_new(Vec::new(), schema, Some(props))?;
    w.write(&batch)?;
    w.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    #[test]
    fn parquet_reads_back() {
        let c = Columns {
            t_ns: vec![1, 2],
            path: vec![0, 1],
            paths: vec!["Vehicle.Speed".into(), "Vehicle.Private.Note".into()],
            value: vec![Some(3.5), None],
            text: vec![None, Some("hi".into())],
        };
        let bytes = to_parquet(c).unwrap();
        let r = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
            .unwrap()
            .build()
            .unwrap();
        let rows: usize = r.map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(rows, 2);
    }

    fn columns(rows: usize) -> Columns {
        Columns {
            t_ns: (0..rows as i64).collect(),
            path: vec![0; rows],
            paths: vec!["Vehicle.Speed".into()],
            value: (0..rows).map(|i| Some(i as f64)).collect(),
            text: vec![None; rows],
        }
    }

    /// Every chunk's codec and the rows read back.
    fn codecs_and_rows(bytes: Vec<u8>) -> (Vec<Compression>, usize) {
        let b = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes)).unwrap();
        let codecs = b
            .metadata()
            .row_groups()
            .iter()
            .flat_map(|g| g.columns().iter().map(|c| c.compression()))
            .collect();
        let rows = b.build().unwrap().map(|b| b.unwrap().num_rows()).sum();
        (codecs, rows)
    }

    #[test]
    fn small_files_are_stored_plain_and_large_ones_compressed() {
        let (small, rows) = codecs_and_rows(to_parquet(columns(3)).unwrap());
        assert_eq!(rows, 3);
        assert!(
            small.iter().all(|c| *c == Compression::UNCOMPRESSED),
            "{small:?}"
        );
        let n = COMPRESS_FROM_ROWS;
        let (large, rows) = codecs_and_rows(to_parquet(columns(n)).unwrap());
        assert_eq!(rows, n);
        assert!(
            large.iter().all(|c| matches!(c, Compression::ZSTD(_))),
            "{large:?}"
        );
    }
}
