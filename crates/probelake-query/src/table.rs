//! A table of one run as a DataFusion [`TableProvider`]: the Parquet files its commit records
//! name, with the partition values from the records rather than parsed from paths.
//!
//! Why not `ListingTable`: it lists folders, so it would show files of unfinished or crashed
//! writes, and DataFusion 55 mis-prunes percent-encoded partition values. Here the visible
//! files are exactly the committed ones, and partition filters are evaluated on the decoded
//! values of each file.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::common::stats::Precision;
use datafusion::common::{DFSchema, ScalarValue, Statistics};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::file_format::FileFormat;
use datafusion::datasource::listing::helpers::{expr_applicable_for_cols, filter_partitioned_file};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::expressions::col;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_datasource::compute_all_files_statistics;
use datafusion_datasource::TableSchema;
use probelake_format::layout::child;
use probelake_format::schema::{partition_columns, schema_of};
use probelake_format::{CommitRecord, Lake, Table};
use serde::{Deserialize, Serialize};

/// One table (`dump`, `stack`, …) of one run.
#[derive(Debug)]
pub struct LakeTable {
    listing: Listing,
    file_schema: SchemaRef,
    partition_fields: Vec<FieldRef>,
    schema: SchemaRef,
    store_url: ObjectStoreUrl,
    files: Vec<CommittedFile>,
}

/// What a [`LakeTable`] is made of, and all a plan sent to another process carries of it
/// ([`LakeTable::to_bytes`]): the committed files as the client listed them, so every process
/// reads the same snapshot of the dataset, whatever is committed meanwhile.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Listing {
    table: Table,
    /// The store the locations are in, as an `ObjectStoreUrl` (`probelake://run0`, `file:///`,
    /// `s3://bucket`).
    store_url: String,
    /// Added to every file's modification time; see [`LakeTable::new`].
    stamp_nanos: u64,
    /// Whether scans declare the order rows are stored in ([`LakeTable::scan_ordering`]).
    ordered: bool,
    files: Vec<ListedFile>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ListedFile {
    /// Object path in the store, percent-encoded as stored.
    location: String,
    bytes: u64,
    rows: u64,
    step: i64,
    stage: String,
    rank: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    api: Option<String>,
}

/// A committed file as a scan needs it. Its statistics are built only when a scan keeps the
/// file: a session registers every table of every run, and a query touches few of them, while
/// statistics for ~30 columns of every file cost more to allocate (in page faults) than the
/// rest of opening a run.
#[derive(Debug)]
struct CommittedFile {
    /// Location and partition values, no statistics.
    file: PartitionedFile,
    rows: u64,
}

impl LakeTable {
    /// The committed files of `table` in `units`, read through the store at `store_url`, which
    /// holds the dataset at [`Lake::root`].
    pub fn new(lake: &Lake, store_url: ObjectStoreUrl, table: Table, units: &[CommitRecord]) -> Self {
        Self::listed(lake.root(), store_url, table, units)
    }

    /// The committed files of `table` in `units`, located as every process names them
    /// ([`Lake::store_location`]: `file:///` and the folder's absolute path, `s3://bucket` and the
    /// prefix), for plans that run in other processes; `None` for a dataset without such a
    /// location (one made from a store handed in).
    pub fn shared(lake: &Lake, table: Table, units: &[CommitRecord]) -> Option<Result<Self>> {
        let (url, root) = lake.store_location()?;
        // Without the stored order: Ballista 55 turns an order-preserving repartition into a
        // shuffle that does not preserve it, yet keeps the merges planned on top of it, so an
        // `ORDER BY step, stage, rank` came back in hash order. Sorts are then planned explicitly.
        Some(ObjectStoreUrl::parse(url).map(|url| {
            let mut table = Self::listed(root, url, table, units);
            table.listing.ordered = false;
            table
        }))
    }

    fn listed(
        root: &object_store::path::Path,
        store_url: ObjectStoreUrl,
        table: Table,
        units: &[CommitRecord],
    ) -> Self {
        // DataFusion caches Parquet footers by object path and checks an entry by size and
        // modification time only. Two runs with files of the same relative path and size (a
        // copied dataset) would share one footer, and a damaged file of one be read with the
        // other's; a modification time of the run's own keeps their entries apart.
        let stamp_nanos = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            store_url.as_str().hash(&mut h);
            root.as_ref().hash(&mut h);
            h.finish() >> 8
        };
        let mut files = Vec::new();
        for record in units {
            for file in record.files_of(table) {
                files.push(ListedFile {
                    location: child(root, &file.path).as_ref().to_string(),
                    bytes: file.bytes,
                    rows: file.rows,
                    step: record.unit.step,
                    stage: record.unit.stage.clone(),
                    rank: record.unit.rank,
                    api: table.has_api_partition().then(|| file.api.clone().unwrap_or_default()),
                });
            }
        }
        let listing = Listing { table, store_url: store_url.as_str().to_string(), stamp_nanos, ordered: true, files };
        Self::from_listing(listing, store_url)
    }

    fn from_listing(listing: Listing, store_url: ObjectStoreUrl) -> Self {
        let table = listing.table;
        let file_schema = schema_of(table);
        let partition_fields: Vec<FieldRef> =
            partition_columns(table).into_iter().map(|(name, ty)| Arc::new(Field::new(name, ty, false))).collect();
        let mut fields: Vec<FieldRef> = file_schema.fields().iter().cloned().collect();
        fields.extend(partition_fields.iter().cloned());
        let schema = Arc::new(Schema::new(fields));
        let stamp = std::time::Duration::from_nanos(listing.stamp_nanos);
        let files = listing
            .files
            .iter()
            .map(|f| {
                let mut values = vec![
                    ScalarValue::Int64(Some(f.step)),
                    ScalarValue::Utf8(Some(f.stage.clone())),
                    ScalarValue::Int64(Some(f.rank)),
                ];
                if let Some(api) = &f.api {
                    values.push(ScalarValue::Utf8(Some(api.clone())));
                }
                // The location is set as a `Path`, never re-parsed from a string: `Path::from(&str)`
                // would percent-encode the `%` of an encoded stage (`a%20b`) a second time.
                let mut pf = PartitionedFile::new(String::new(), f.bytes).with_partition_values(values);
                pf.object_meta.location =
                    object_store::path::Path::parse(&f.location).unwrap_or_else(|_| f.location.split('/').collect());
                pf.object_meta.last_modified += stamp;
                CommittedFile { file: pf, rows: f.rows }
            })
            .collect();
        LakeTable { listing, file_schema, partition_fields, schema, store_url, files }
    }

    /// The table as a plan carries it to another process: its committed files (locations,
    /// sizes, rows, partition values) and its store's URL, as JSON. The other process reads
    /// exactly these files ([`LakeTable::from_bytes`]), however the dataset changed meanwhile.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        serde_json::to_vec(&self.listing)
            .map_err(|e| DataFusionError::Internal(format!("a probelake table as JSON: {e}")))
    }

    /// The table [`LakeTable::to_bytes`] wrote.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let listing: Listing = serde_json::from_slice(bytes)
            .map_err(|e| DataFusionError::Internal(format!("not a probelake table in this plan: {e}")))?;
        let url = ObjectStoreUrl::parse(&listing.store_url)?;
        Ok(Self::from_listing(listing, url))
    }

    /// The table's name (`dump`, `stack`, …).
    pub fn table(&self) -> Table {
        self.listing.table
    }

    /// How many files the table has.
    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    /// The files that pass `partition_filters`, in `n` contiguous groups (none when no file
    /// passes) with their statistics, and the statistics of them all: what [`TableProvider::scan`]
    /// reads.
    pub fn file_groups(&self, partition_filters: &[Expr], n: usize) -> Result<(Vec<FileGroup>, Statistics)> {
        let partition_schema = DFSchema::try_from(Schema::new(self.partition_fields.clone()))?;
        let mut kept = Vec::with_capacity(self.files.len());
        for CommittedFile { file, rows } in &self.files {
            if let Some(f) = filter_partitioned_file(file.clone(), partition_filters, &partition_schema)? {
                let stats = file_statistics(&self.file_schema, self.partition_fields.len(), *rows, f.object_meta.size);
                kept.push(f.with_statistics(Arc::new(stats)));
            }
        }
        if kept.is_empty() {
            return Ok((Vec::new(), Statistics::new_unknown(&self.schema)));
        }
        compute_all_files_statistics(contiguous_groups(kept, n), Arc::clone(&self.schema), true, false)
    }

    fn partition_names(&self) -> Vec<&str> {
        self.partition_fields.iter().map(|f| f.name().as_str()).collect()
    }

    /// The order of a scan's rows: the partition columns, then the keys rows are sorted by
    /// inside every file (`seq, leaf` for `dump`). It holds for a group of files sorted by
    /// partition values with at most one file per value; DataFusion checks that against each
    /// file's statistics ([`file_statistics`]) and drops the ordering where it does not hold.
    fn scan_ordering(&self) -> Vec<LexOrdering> {
        if !self.listing.ordered {
            return Vec::new();
        }
        let in_file: &[&str] = match self.listing.table {
            Table::Dump => &["seq", "leaf"],
            Table::Construct => &["seq"],
            Table::Stack => &["group"],
            Table::Tensor | Table::Source => &[],
        };
        let exprs: Vec<PhysicalSortExpr> = self
            .partition_names()
            .into_iter()
            .chain(in_file.iter().copied())
            .filter_map(|k| col(k, &self.schema).ok())
            .map(|e| PhysicalSortExpr { expr: e, options: ASC_NULLS_LAST })
            .collect();
        LexOrdering::new(exprs).into_iter().collect()
    }
}

/// SQL's `ORDER BY x` (DataFusion's default is NULLS LAST); the sort columns hold no NULLs,
/// so the files are sorted this way as much as any other, and declaring it lets plans match.
const ASC_NULLS_LAST: SortOptions = SortOptions { descending: false, nulls_first: false };

/// What is known about a file without opening it: its row count (from the commit record) and,
/// for the integer columns rows are sorted by, bounds that always hold (the type's range), so
/// that DataFusion can prove a group of files with distinct partition values sorted.
fn file_statistics(file_schema: &Schema, partition_columns: usize, rows: u64, bytes: u64) -> Statistics {
    let mut stats = Statistics::new_unknown(file_schema);
    // `PartitionedFile::with_statistics` appends the partition columns' statistics.
    stats.column_statistics.reserve_exact(partition_columns);
    stats.num_rows = usize::try_from(rows).map_or(Precision::Absent, Precision::Exact);
    stats.total_byte_size = usize::try_from(bytes).map_or(Precision::Absent, Precision::Inexact);
    for (field, column) in file_schema.fields().iter().zip(stats.column_statistics.iter_mut()) {
        let bounds = match field.data_type() {
            DataType::Int64 => Some((ScalarValue::Int64(Some(i64::MIN)), ScalarValue::Int64(Some(i64::MAX)))),
            DataType::Int32 => Some((ScalarValue::Int32(Some(i32::MIN)), ScalarValue::Int32(Some(i32::MAX)))),
            _ => None,
        };
        if let Some((min, max)) = bounds {
            column.min_value = Precision::Inexact(min);
            column.max_value = Precision::Inexact(max);
        }
    }
    stats
}

/// Files in partition-value order, cut into at most `n` contiguous groups of about equal
/// bytes: each group is then one sorted stream (see [`LakeTable::scan_ordering`]).
fn contiguous_groups(mut files: Vec<PartitionedFile>, n: usize) -> Vec<FileGroup> {
    files.sort_by(|a, b| cmp_partition_values(&a.partition_values, &b.partition_values));
    let total: u64 = files.iter().map(|f| f.object_meta.size).sum();
    let per_group = total.div_ceil(n.max(1) as u64).max(1);
    let mut groups = Vec::with_capacity(n);
    let mut current = Vec::new();
    let mut bytes = 0;
    for file in files {
        bytes += file.object_meta.size;
        current.push(file);
        if bytes >= per_group && groups.len() + 1 < n {
            groups.push(FileGroup::new(std::mem::take(&mut current)));
            bytes = 0;
        }
    }
    if !current.is_empty() {
        groups.push(FileGroup::new(current));
    }
    groups
}

fn cmp_partition_values(a: &[ScalarValue], b: &[ScalarValue]) -> std::cmp::Ordering {
    a.iter()
        .zip(b)
        .map(|(x, y)| x.partial_cmp(y).unwrap_or(std::cmp::Ordering::Equal))
        .find(|o| o.is_ne())
        .unwrap_or(std::cmp::Ordering::Equal)
}

#[async_trait]
impl TableProvider for LakeTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        let names = self.partition_names();
        Ok(filters
            .iter()
            .map(|f| {
                if expr_applicable_for_cols(&names, f) {
                    TableProviderFilterPushDown::Exact
                } else {
                    TableProviderFilterPushDown::Inexact
                }
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let names = self.partition_names();
        let (partition_filters, _): (Vec<Expr>, Vec<Expr>) =
            filters.iter().cloned().partition(|f| expr_applicable_for_cols(&names, f));
        let (groups, statistics) = self.file_groups(&partition_filters, state.config().target_partitions())?;
        if groups.is_empty() {
            let projected = match projection {
                Some(p) => Arc::new(self.schema.project(p)?),
                None => Arc::clone(&self.schema),
            };
            return Ok(Arc::new(EmptyExec::new(projected)));
        }
        // The session's `datafusion.execution.parquet.*` settings (SET in SQL) apply here too.
        let format = ParquetFormat::default().with_options(state.default_table_options().parquet);
        let table_schema = TableSchema::builder(Arc::clone(&self.file_schema))
            .with_table_partition_cols(self.partition_fields.clone())
            .build();
        let source = format.file_source(table_schema);
        let config = FileScanConfigBuilder::new(self.store_url.clone(), source)
            .with_file_groups(groups)
            .with_statistics(statistics)
            .with_projection_indices(projection.cloned())?
            .with_limit(limit)
            .with_output_ordering(self.scan_ordering())
            .build();
        format.create_physical_plan(state, config).await
    }
}

/// The data type of a partition column, for tests and docs.
pub fn partition_type(table: Table, name: &str) -> Option<DataType> {
    partition_columns(table).into_iter().find(|(n, _)| *n == name).map(|(_, t)| t)
}

/// A run as the `first_divergence` table function reads it: its dataset and the units the
/// session shows of it.
#[derive(Debug, Clone)]
pub struct RunUnits {
    /// The dataset.
    pub lake: probelake_format::Lake,
    /// Its committed units, as the session's tables show them.
    pub units: std::sync::Arc<Vec<probelake_format::CommitRecord>>,
}
