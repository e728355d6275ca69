// cache/io reports errors with cache/base's Status and Result<T> (one error
// type for all of cache/). These declarations keep the spelling io::Status and
// io::Result valid for code outside the namespace; they are the same types.
#ifndef PRESCIENT_CACHE_IO_STATUS_H_
#define PRESCIENT_CACHE_IO_STATUS_H_

#include "cache/base/status.h"

namespace prescient::cache::io {

using ::prescient::cache::Result;
using ::prescient::cache::Status;

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_STATUS_H_
