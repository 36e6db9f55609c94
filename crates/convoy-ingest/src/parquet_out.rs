//! Telemetry columns as one Parquet file (zstd), the format analytics
//! tools (DuckDB, Spark, pandas) read without convoy. Columns: `t_ns`
//! (timestamp, ns, UTC), `path` (the VSS name, dictionary-encoded by
//! the writer), `value` (numbers and booleans as 0/1) and `text`.

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

/// Encodes the columns as a Parquet file in memory.
pub fn to_parquet(c: Columns) -> Result<Vec<u8>, parquet::errors::ParquetError> {
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
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
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
}
