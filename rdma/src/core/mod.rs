//! The RDMA core: the appliance's ib_core (device/client registries, GID cache, link ops).
