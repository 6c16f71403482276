/*
 * common/control-protocol.h: the control socket's protocol, the one header
 * xbd-back (blkback/control/control.c answers, datapath/stats.c and
 * control.c write the metrics) and xbdctl (xbdctl/) share, so that each word, each
 * metric name and each label name is spelt once.  xbdctl(8) and
 * xbd-back(8) describe them to users; a name here is a user-visible name:
 * changing one changes xbdctl's command line or a Prometheus series.
 *
 * A unix stream socket, one request per connection: the client writes one
 * line of words separated by tabs ("stats\t--format\tprometheus\tvbd/1/51728\n"),
 * the daemon answers "ok\n" and the body, or "error: WHY\n", and closes.
 */
#ifndef XBD_CONTROL_PROTOCOL_H
#define XBD_CONTROL_PROTOCOL_H

/* ---- where the socket is ---- */

/* xbd-back's run-time directory (the socket, the host lock, the journals). */
#define XBD_DEFAULT_RUN_DIR "/run/xbd"
/* The socket on a host, unless --control or the control key names another. */
#define XBD_DEFAULT_CONTROL XBD_DEFAULT_RUN_DIR "/xbd-back.sock"
/*
 * The socket on a simulated host (directory, domid as a string), so that
 * tests on different simulated hosts never meet.
 */
#define XBD_SIM_CONTROL_FMT "%s/xbd-back.%s.sock"

/* ---- a request ---- */

#define XBD_CTL_SEP "\t"

/* The commands, and the list error lines name. */
#define XBD_CTL_LIST "list"
#define XBD_CTL_STATS "stats"
#define XBD_CTL_SET "set"
#define XBD_CTL_VERSION "version"
/* Changed-block tracking (xbd-back's control/checkpoint.c). */
#define XBD_CTL_CHECKPOINT "checkpoint"
#define XBD_CTL_CHECKPOINTS "checkpoints"
#define XBD_CTL_CHANGES "changes"
#define XBD_CTL_DROP "drop"
#define XBD_CTL_RELEASE "release"
#define XBD_CTL_COMMANDS XBD_CTL_LIST ", " XBD_CTL_STATS ", " XBD_CTL_SET ", " XBD_CTL_VERSION \
	", " XBD_CTL_CHECKPOINT ", " XBD_CTL_CHECKPOINTS ", " XBD_CTL_CHANGES ", " XBD_CTL_DROP \
	", " XBD_CTL_RELEASE

/* The words a request may hold anywhere: --json, --format FORMAT, --by ring|device. */
#define XBD_CTL_JSON "--json"
#define XBD_CTL_FORMAT "--format"
#define XBD_CTL_BY "--by"
#define XBD_CTL_FORMAT_TABLE "table"
#define XBD_CTL_FORMAT_JSON "json"
#define XBD_CTL_FORMAT_PROMETHEUS "prometheus"
#define XBD_CTL_FORMATS XBD_CTL_FORMAT_TABLE ", " XBD_CTL_FORMAT_JSON ", " XBD_CTL_FORMAT_PROMETHEUS
#define XBD_CTL_BY_RING "ring"
#define XBD_CTL_BY_DEVICE "device"

/* ---- the answer ---- */

#define XBD_CTL_OK "ok"
#define XBD_CTL_ERROR "error: "

/* ---- the metrics of stats --format prometheus ---- */

/* Every series' name starts so. */
#define XBD_METRIC_PREFIX "xbd_"
/* A histogram's series: NAME_bucket{le=...}, NAME_sum, NAME_count. */
#define XBD_METRIC_BUCKET "_bucket"
#define XBD_METRIC_SUM "_sum"
#define XBD_METRIC_COUNT "_count"

/*
 * The labels of a series, NAME{LABEL="value",...}: which device and ring
 * a series is of (control.c), and what a member of a family is (stats.c).
 * xbdctl's live view reads device, op and le.
 */
/* LABEL="value", value a string literal or a printf conversion ("%s"). */
#define XBD_LABEL_EQ(label, value) label "=\"" value "\""
#define XBD_LABEL_DOMAIN "domain"   /* the frontend's domain id */
#define XBD_LABEL_DOMAIN_NAME "domain_name" /* its name, as xl list shows it ("" unknown) */
#define XBD_LABEL_DEVICE "device"   /* TYPE/DOMID/DEVID, as xbdctl names a device */
#define XBD_LABEL_RING "ring"       /* the ring's index (stats --by ring) */
#define XBD_LABEL_OP "op"           /* a request's operation: the words below */
#define XBD_LABEL_REASON "reason"   /* why validation refused a request */
#define XBD_LABEL_LE "le"           /* a histogram bucket's upper bound */
#define XBD_LABEL_LE_INF "+Inf"     /* the last bucket's */
#define XBD_LABEL_LIMIT "limit"     /* an I/O limit's setting (a burst: SETTING-max) */
#define XBD_LABEL_UNIT "unit"       /* what the limit counts */
#define XBD_LABEL_VERSION "version" /* xbd-back's (xbd_back_info) */
/* A device's description (xbd_device_info). */
#define XBD_LABEL_STATE "state"
#define XBD_LABEL_MODE "mode"
#define XBD_LABEL_CACHE "cache"
#define XBD_LABEL_GRANTS "grants"
#define XBD_LABEL_PARAMS "params"

/* The values of op. */
#define XBD_OP_READ "read"
#define XBD_OP_WRITE "write"
#define XBD_OP_FLUSH "flush"
#define XBD_OP_DISCARD "discard"
#define XBD_OP_BARRIER "barrier"

/* What describes the daemon and each device (control.c). */
#define XBD_METRIC_BACK_INFO "xbd_back_info"
#define XBD_METRIC_DEVICE_INFO "xbd_device_info"
#define XBD_METRIC_DEVICE_SIZE "xbd_device_size_bytes"
#define XBD_METRIC_DEVICE_RINGS "xbd_device_rings"
#define XBD_METRIC_DEVICE_LIMIT "xbd_device_limit_per_second"

/* A ring's (or a device's) counters and histograms (stats.c). */
#define XBD_METRIC_REQUESTS "xbd_requests_total"
#define XBD_METRIC_READ_BYTES "xbd_read_bytes_total"
#define XBD_METRIC_WRITTEN_BYTES "xbd_written_bytes_total"
#define XBD_METRIC_GRANT_ERRORS "xbd_grant_errors_total"
#define XBD_METRIC_IO_ERRORS "xbd_io_errors_total"
#define XBD_METRIC_OUT_OF_SLOT "xbd_out_of_slot_waits_total"
#define XBD_METRIC_REAPED "xbd_completions_reaped_total"
#define XBD_METRIC_REAP_CALLS "xbd_reap_calls_total"
#define XBD_METRIC_GRANT_MAP_CALLS "xbd_grant_map_calls_total"
#define XBD_METRIC_GRANT_COPY_CALLS "xbd_grant_copy_calls_total"
#define XBD_METRIC_GRANT_UNMAP_CALLS "xbd_grant_unmap_calls_total"
#define XBD_METRIC_PERSISTENT_HITS "xbd_persistent_grant_hits_total"
#define XBD_METRIC_PERSISTENT_MISSES "xbd_persistent_grant_misses_total"
#define XBD_METRIC_NOTIFY_SENT "xbd_notifications_sent_total"
#define XBD_METRIC_NOTIFY_RECEIVED "xbd_notifications_received_total"
#define XBD_METRIC_POLL_HITS "xbd_poll_hits_total"
#define XBD_METRIC_POLL_MISSES "xbd_poll_misses_total"
#define XBD_METRIC_POLL_SECONDS "xbd_poll_seconds_total"
#define XBD_METRIC_CLOCK_READS "xbd_clock_reads_total"
#define XBD_METRIC_THROTTLED "xbd_throttled_requests_total"
#define XBD_METRIC_THROTTLED_SECONDS "xbd_throttled_seconds_total"
#define XBD_METRIC_CBT_HELD "xbd_cbt_held_writes_total"
#define XBD_METRIC_CBT_SYNCS "xbd_cbt_syncs_total"
#define XBD_METRIC_CBW_BLOCKS "xbd_cbw_copied_blocks_total"
/* A disk's changed-block tracking (control/checkpoint.c). */
#define XBD_METRIC_CBT_ENABLED "xbd_cbt_enabled"
#define XBD_METRIC_CBT_CHECKPOINTS "xbd_cbt_checkpoints"
#define XBD_METRIC_CBT_BITMAP_BYTES "xbd_cbt_bitmap_bytes"
#define XBD_METRIC_CBT_VIEW "xbd_cbt_view_active"
#define XBD_METRIC_CBT_SCRATCH_USED "xbd_cbt_view_scratch_used_bytes"
#define XBD_METRIC_CBT_SCRATCH "xbd_cbt_view_scratch_bytes"
#define XBD_METRIC_INVALID "xbd_invalid_requests_total"
#define XBD_METRIC_IN_FLIGHT "xbd_requests_in_flight"
#define XBD_METRIC_SUBMIT_BATCH "xbd_io_submit_batch_iocbs"             /* histogram */
#define XBD_METRIC_LATENCY "xbd_request_latency_seconds"                /* histogram */
#define XBD_METRIC_LATENCY_MAX "xbd_request_latency_max_seconds"

#endif /* XBD_CONTROL_PROTOCOL_H */
