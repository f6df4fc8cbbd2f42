// device.cu — devices, and the machinery that orders work on one: streams,
// events (the clock of every crossing) and CUDA graphs.
#include <stdio.h>
#include <stdlib.h>

#include "cuda_common.cuh"

extern "C" int seam_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();  // no driver or no device: clear the sticky error
        return 0;
    }
    return n;
}

extern "C" int seam_cuda_device_info(int device, seam_cuda_info *info, seam_error *e) {
    if (device < 0 || device >= seam_cuda_device_count())
        return seam_fail(e, "CUDA device %d does not exist", device);
    cudaDeviceProp p;
    CUDA_TRY(e, cudaGetDeviceProperties(&p, device));
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->major = p.major;
    info->minor = p.minor;
    info->sm_count = p.multiProcessorCount;
#ifdef SEAM_CUDA_EMU
    info->emulated = true;
#endif
    // The peak bandwidth is a figure to compare with, not something to run
    // on: a device that does not report it gets 0 ("unknown"), not a failure.
    int mem_clock_khz = 0, bus_bits = 0;
    if (cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess) {
        cudaGetLastError();
        mem_clock_khz = bus_bits = 0;
    }
    info->mem_bandwidth_gbs = 2.0 * mem_clock_khz * 1e3 * (bus_bits / 8) / 1e9;  // DDR: two transfers a clock
    size_t free_b = 0, total_b = 0;
    CUDA_TRY(e, cudaSetDevice(device));
    CUDA_TRY(e, cudaMemGetInfo(&free_b, &total_b));
    info->free_bytes = free_b;
    info->total_bytes = total_b;
    return 0;
}

static int init_device = -1;

extern "C" int seam_cuda_init(int device, seam_error *e) {
    if (device < 0 || device >= seam_cuda_device_count())
        return seam_fail(e, "CUDA device %d does not exist", device);
    if (init_device == device) return 0;
    if (init_device >= 0) return seam_fail(e, "seam_cuda_init: already set up for device %d", init_device);
    CUDA_TRY(e, cudaSetDevice(device));
    if (attention_init(device, e) || geglu_init(e)) return -1;
    init_device = device;
    return 0;
}

// ---------------------------------------------------------------- streams

extern "C" int seam_cuda_stream_create(seam_cuda_stream **s, seam_error *e) {
    *s = (seam_cuda_stream *)calloc(1, sizeof **s);
    if (!*s) return seam_fail(e, "out of host memory for a stream");
    const cudaError_t err = cudaStreamCreateWithFlags(&(*s)->s, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
        free(*s);
        *s = NULL;
        return cuda_fail_at(e, __FILE__, __LINE__, "cudaStreamCreateWithFlags", err);
    }
    return 0;
}

extern "C" void seam_cuda_stream_destroy(seam_cuda_stream *s) {
    if (!s) return;
    cudaStreamDestroy(s->s);
    free(s);
}

extern "C" int seam_cuda_stream_synchronize(seam_cuda_stream *s, seam_error *e) {
    CUDA_TRY(e, cudaStreamSynchronize(stream_of(s)));
    return 0;
}

// ---------------------------------------------------------------- events

struct seam_cuda_event {
    cudaEvent_t ev;
};

extern "C" int seam_cuda_event_create(seam_cuda_event **ev, seam_error *e) {
    *ev = (seam_cuda_event *)calloc(1, sizeof **ev);
    if (!*ev) return seam_fail(e, "out of host memory for an event");
    const cudaError_t err = cudaEventCreate(&(*ev)->ev);  // with timing
    if (err != cudaSuccess) {
        free(*ev);
        *ev = NULL;
        return cuda_fail_at(e, __FILE__, __LINE__, "cudaEventCreate", err);
    }
    return 0;
}

extern "C" void seam_cuda_event_destroy(seam_cuda_event *ev) {
    if (!ev) return;
    cudaEventDestroy(ev->ev);
    free(ev);
}

extern "C" int seam_cuda_event_record(seam_cuda_event *ev, seam_cuda_stream *s, seam_error *e) {
    if (!ev) return seam_fail(e, "event_record: NULL event");
    // Inside a capture a plain record only orders streams; an external
    // record becomes a node that records the event at every replay, so
    // crossings inside a graph are timed too.
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    CUDA_TRY(e, cudaStreamIsCapturing(stream_of(s), &capturing));
    const unsigned flags = capturing == cudaStreamCaptureStatusActive ? cudaEventRecordExternal : cudaEventRecordDefault;
    CUDA_TRY(e, cudaEventRecordWithFlags(ev->ev, stream_of(s), flags));
    return 0;
}

extern "C" int seam_cuda_stream_wait_event(seam_cuda_stream *s, const seam_cuda_event *ev, seam_error *e) {
    if (!ev) return seam_fail(e, "stream_wait_event: NULL event");
    CUDA_TRY(e, cudaStreamWaitEvent(stream_of(s), ev->ev, 0));
    return 0;
}

extern "C" int seam_cuda_event_elapsed_ms(const seam_cuda_event *start, const seam_cuda_event *end, float *ms,
                                          seam_error *e) {
    if (!start || !end || !ms) return seam_fail(e, "event_elapsed_ms: NULL argument");
    CUDA_TRY(e, cudaEventSynchronize(end->ev));
    CUDA_TRY(e, cudaEventElapsedTime(ms, start->ev, end->ev));
    return 0;
}

// ---------------------------------------------------------------- graphs

struct seam_cuda_graph {
    cudaGraphExec_t exec;
};

extern "C" int seam_cuda_graph_begin(seam_cuda_stream *s, seam_error *e) {
    if (!s) return seam_fail(e, "graph_begin: capture needs a created stream, not the default one");
    // Global mode: a call that would break the capture (a synchronous copy,
    // cudaMalloc) from any thread fails loudly instead.
    CUDA_TRY(e, cudaStreamBeginCapture(s->s, cudaStreamCaptureModeGlobal));
    return 0;
}

extern "C" int seam_cuda_graph_end(seam_cuda_stream *s, seam_cuda_graph **g, seam_error *e) {
    *g = NULL;
    if (!s) return seam_fail(e, "graph_end: NULL stream");
    cudaGraph_t graph = NULL;
    CUDA_TRY(e, cudaStreamEndCapture(s->s, &graph));  // fails when the capture was invalidated
    cudaGraphExec_t exec = NULL;
    const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);  // the executable graph keeps what it needs
    if (err != cudaSuccess) return cuda_fail_at(e, __FILE__, __LINE__, "cudaGraphInstantiate", err);
    *g = (seam_cuda_graph *)calloc(1, sizeof **g);
    if (!*g) {
        cudaGraphExecDestroy(exec);
        return seam_fail(e, "out of host memory for a graph");
    }
    (*g)->exec = exec;
    return 0;
}

extern "C" void seam_cuda_graph_discard(seam_cuda_stream *s) {
    if (!s) return;
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s->s, &capturing) != cudaSuccess || capturing == cudaStreamCaptureStatusNone) return;
    cudaGraph_t graph = NULL;
    cudaStreamEndCapture(s->s, &graph);  // an invalidated capture ends too, with no graph
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();  // the error the caller reports is the op's, not this one's
}

extern "C" int seam_cuda_graph_launch(seam_cuda_graph *g, seam_cuda_stream *s, seam_error *e) {
    if (!g) return seam_fail(e, "graph_launch: NULL graph");
    CUDA_TRY(e, cudaGraphLaunch(g->exec, stream_of(s)));
    return 0;
}

extern "C" void seam_cuda_graph_destroy(seam_cuda_graph *g) {
    if (!g) return;
    cudaGraphExecDestroy(g->exec);
    free(g);
}
