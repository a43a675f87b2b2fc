//! A table of one run as a DataFusion [`TableProvider`]: the Parquet files its commit records
//! name, with the partition values from the records rather than parsed from paths.
//!
//! Why not `ListingTable`: it lists folders, so it would show files of unfinished or crashed
//! writes, and DataFusion 55 mis-prunes percent-encoded partition values. Here the visible
//! files are exactly the committed ones, and partition filters are evaluated on the decoded
//! values of each file.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::file_format::FileFormat;
use datafusion::datasource::listing::helpers::{expr_applicable_for_cols, filter_partitioned_file};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder};
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::Result;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::expressions::col;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_datasource::TableSchema;
use probelake_format::layout::child;
use probelake_format::schema::{partition_columns, schema_of};
use probelake_format::{CommitRecord, Lake, Table};

/// One table (`dump`, `stack`, …) of one run.
#[derive(Debug)]
pub struct LakeTable {
    table: Table,
    file_schema: SchemaRef,
    partition_fields: Vec<FieldRef>,
    schema: SchemaRef,
    store_url: ObjectStoreUrl,
    files: Vec<PartitionedFile>,
}

impl LakeTable {
    /// The committed files of `table` in `units`, read through the store at `store_url`.
    pub fn new(lake: &Lake, store_url: ObjectStoreUrl, table: Table, units: &[CommitRecord]) -> Self {
        let file_schema = schema_of(table);
        let partition_fields: Vec<FieldRef> =
            partition_columns(table).into_iter().map(|(name, ty)| Arc::new(Field::new(name, ty, false))).collect();
        let mut fields: Vec<FieldRef> = file_schema.fields().iter().cloned().collect();
        fields.extend(partition_fields.iter().cloned());
        let schema = Arc::new(Schema::new(fields));
        let mut files = Vec::new();
        for record in units {
            for file in record.files_of(table) {
                let location = child(lake.root(), &file.path);
                let mut values = vec![
                    ScalarValue::Int64(Some(record.unit.step)),
                    ScalarValue::Utf8(Some(record.unit.stage.clone())),
                    ScalarValue::Int64(Some(record.unit.rank)),
                ];
                if table.has_api_partition() {
                    values.push(ScalarValue::Utf8(Some(file.api.clone().unwrap_or_default())));
                }
                // The location is set as a `Path`, never re-parsed from a string: `Path::from(&str)`
                // would percent-encode the `%` of an encoded stage (`a%20b`) a second time.
                let mut pf = PartitionedFile::new(String::new(), file.bytes).with_partition_values(values);
                pf.object_meta.location = location;
                files.push(pf);
            }
        }
        LakeTable { table, file_schema, partition_fields, schema, store_url, files }
    }

    /// How many files the table has.
    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    fn partition_names(&self) -> Vec<&str> {
        self.partition_fields.iter().map(|f| f.name().as_str()).collect()
    }

    /// The order rows have inside every file.
    fn file_ordering(&self) -> Vec<LexOrdering> {
        let keys: &[&str] = match self.table {
            Table::Dump => &["seq", "leaf"],
            Table::Construct => &["seq"],
            Table::Stack => &["group"],
            Table::Tensor | Table::Source => &[],
        };
        let exprs: Vec<PhysicalSortExpr> = keys
            .iter()
            .filter_map(|k| col(k, &self.schema).ok())
            .map(|e| PhysicalSortExpr { expr: e, options: Default::default() })
            .collect();
        LexOrdering::new(exprs).into_iter().collect()
    }
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
        let partition_schema = DFSchema::try_from(Schema::new(self.partition_fields.clone()))?;
        let mut kept = Vec::with_capacity(self.files.len());
        for file in &self.files {
            if let Some(f) = filter_partitioned_file(file.clone(), &partition_filters, &partition_schema)? {
                kept.push(f);
            }
        }
        if kept.is_empty() {
            let projected = match projection {
                Some(p) => Arc::new(self.schema.project(p)?),
                None => Arc::clone(&self.schema),
            };
            return Ok(Arc::new(EmptyExec::new(projected)));
        }
        // One group per file up to the target partitions keeps files whole, so the declared
        // per-file order holds.
        let target = state.config().target_partitions().max(1);
        let mut groups: Vec<Vec<PartitionedFile>> = vec![Vec::new(); target.min(kept.len())];
        for (i, f) in kept.into_iter().enumerate() {
            let n = groups.len();
            if let Some(g) = groups.get_mut(i % n) {
                g.push(f);
            }
        }
        let format = ParquetFormat::default();
        let table_schema = TableSchema::builder(Arc::clone(&self.file_schema))
            .with_table_partition_cols(self.partition_fields.clone())
            .build();
        let source = format.file_source(table_schema);
        let ordering = if groups.iter().all(|g| g.len() == 1) { self.file_ordering() } else { Vec::new() };
        let config = FileScanConfigBuilder::new(self.store_url.clone(), source)
            .with_file_groups(groups.into_iter().map(FileGroup::new).collect())
            .with_projection_indices(projection.cloned())?
            .with_limit(limit)
            .with_output_ordering(ordering)
            .build();
        format.create_physical_plan(state, config).await
    }
}

/// The data type of a partition column, for tests and docs.
pub fn partition_type(table: Table, name: &str) -> Option<DataType> {
    partition_columns(table).into_iter().find(|(n, _)| *n == name).map(|(_, t)| t)
}
