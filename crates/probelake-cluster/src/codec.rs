//! How a plan carries probelake's tables to the scheduler.
//!
//! The client sends the scheduler a logical plan; the scheduler plans it physically, so every
//! table scan in it must travel as something the scheduler can turn back into a table. A
//! [`LakeTable`] travels as its list of committed files ([`LakeTable::to_bytes`]): the scheduler
//! plans over exactly the units the client saw, and executors read exactly those files.
//! Everything else is Ballista's own codec: Ballista takes one logical codec, so this one wraps
//! it instead of replacing it.

use std::sync::Arc;

use ballista_core::serde::BallistaLogicalExtensionCodec;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::common::TableReference;
use datafusion::datasource::file_format::FileFormatFactory;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{Extension, LogicalPlan};
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use probelake_query::table::LakeTable;

/// First bytes of an encoded [`LakeTable`]; anything else is Ballista's.
const MAGIC: &[u8] = b"probelake-table:";

/// Ballista's logical codec, plus probelake's tables.
#[derive(Debug, Default)]
pub struct LakeCodec {
    ballista: BallistaLogicalExtensionCodec,
}

impl LogicalExtensionCodec for LakeCodec {
    fn try_decode(&self, buf: &[u8], inputs: &[LogicalPlan], ctx: &TaskContext) -> Result<Extension> {
        self.ballista.try_decode(buf, inputs, ctx)
    }

    fn try_encode(&self, node: &Extension, buf: &mut Vec<u8>) -> Result<()> {
        self.ballista.try_encode(node, buf)
    }

    fn try_decode_table_provider(
        &self,
        buf: &[u8],
        table_ref: &TableReference,
        schema: SchemaRef,
        ctx: &TaskContext,
    ) -> Result<Arc<dyn TableProvider>> {
        match buf.strip_prefix(MAGIC) {
            Some(listing) => {
                let table = LakeTable::from_bytes(listing)?;
                if table.schema().fields() != schema.fields() {
                    return Err(DataFusionError::Internal(format!(
                        "{table_ref}: the client's schema of `{}` is not this process's; run the same probelake version everywhere",
                        table.table().name()
                    )));
                }
                Ok(Arc::new(table))
            }
            None => self.ballista.try_decode_table_provider(buf, table_ref, schema, ctx),
        }
    }

    fn try_encode_table_provider(
        &self,
        table_ref: &TableReference,
        node: Arc<dyn TableProvider>,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        match node.downcast_ref::<LakeTable>() {
            Some(table) => {
                buf.extend_from_slice(MAGIC);
                buf.extend_from_slice(&table.to_bytes()?);
                Ok(())
            }
            None => self.ballista.try_encode_table_provider(table_ref, node, buf),
        }
    }

    fn try_decode_file_format(&self, buf: &[u8], ctx: &TaskContext) -> Result<Arc<dyn FileFormatFactory>> {
        self.ballista.try_decode_file_format(buf, ctx)
    }

    fn try_encode_file_format(&self, buf: &mut Vec<u8>, node: Arc<dyn FileFormatFactory>) -> Result<()> {
        self.ballista.try_encode_file_format(buf, node)
    }
}
