/* timeutil: monotonic and wall clocks in the units the rest of the code wants. */
#ifndef TRAINYARD_UTIL_TIMEUTIL_H
#define TRAINYARD_UTIL_TIMEUTIL_H

#include <stdint.h>

/* Seconds on the monotonic clock, for measuring durations. */
double time_mono(void);

/* Milliseconds since the Unix epoch, for timestamps people read. */
int64_t time_wall_ms(void);

#endif
