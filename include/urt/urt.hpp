// urt/urt.hpp: the whole public API.
#pragma once

#include "urt/worker_set.hpp"
#include "urt/priority.hpp"
#include "urt/group.hpp"
#include "urt/options.hpp"
#include "urt/per_cid.hpp"
#include "urt/runtime.hpp"
#include "urt/stats.hpp"
#include "urt/task.hpp"
#include "urt/topology.hpp"
