//! The functions every cluster process knows: DataFusion's (as Ballista lists them) and
//! probelake's.

use std::sync::Arc;

use ballista_core::registry::BallistaFunctionRegistry;
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::execution::{FunctionRegistry, SessionState, SessionStateBuilder};
use datafusion::prelude::SessionConfig;

use crate::stores::ClusterStores;

/// Ballista's function registry with probelake's functions added: executors find a plan's
/// functions here by name.
pub fn registry() -> BallistaFunctionRegistry {
    let mut registry = BallistaFunctionRegistry::default();
    for f in probelake_query::udf::functions() {
        registry.scalar_functions.insert(f.name().to_string(), f);
    }
    registry
}

/// The runtime of a cluster process: DataFusion's, with its stores opened by `stores`.
pub fn runtime(stores: &Arc<ClusterStores>) -> datafusion::error::Result<Arc<RuntimeEnv>> {
    let registry = Arc::clone(stores) as Arc<dyn datafusion::execution::object_store::ObjectStoreRegistry>;
    Ok(Arc::new(RuntimeEnvBuilder::new().with_object_store_registry(registry).build()?))
}

/// A scheduler's session for `config` (sent by the client): Ballista's default session with
/// probelake's functions and the scheduler's stores, so that the client's logical plans decode
/// and plan here.
pub fn scheduler_session(
    config: SessionConfig,
    stores: &Arc<ClusterStores>,
) -> datafusion::error::Result<SessionState> {
    let ballista = ballista_core::utils::default_session_builder(config)?;
    let mut state = SessionStateBuilder::new_from_existing(ballista).with_runtime_env(runtime(stores)?).build();
    for f in probelake_query::udf::functions() {
        state.register_udf(f)?;
    }
    Ok(state)
}
