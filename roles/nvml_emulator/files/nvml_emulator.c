/*
 * NVML emulator: a libnvidia-ml.so.1 that reports GPUs described in a text file, so that
 * Slurm's own gpu/nvml plugin (AutoDetect=nvml) can be run on machines without a GPU. TEST HOSTS
 * ONLY (roles/nvml_emulator refuses other hosts): it stands in for the NVIDIA driver.
 *
 * Config: $CLUSTER_CLI_NVML_EMULATOR_CONF, default /etc/cluster-cli/nvml-emulator.conf. Without
 * the file nvmlInit answers NVML_ERROR_DRIVER_NOT_LOADED, as the real library does without a
 * driver. Format (docs/gpu.md), '#' starts a comment:
 *
 *   driver_version = 535.261.03
 *   [gpu 0]
 *   name = NVIDIA H100 80GB HBM3
 *   uuid = GPU-...            pci_bus_id = 00000000:18:00.0     minor = 0
 *   memory_mib = 81559        cpu_affinity = 0-15,32-47         nvlink_peers = 1,1,2,3
 *   mig = off | on | unsupported      mig_devices = 2   mig_slices = 3   mig_memory_mib = 40448
 *   memory_used_mib = 1024    utilization_gpu = 87   utilization_memory = 40 (percent)
 *   temperature_c = 45        power_mw = 312000      ecc_corrected = 0   ecc_uncorrected = 0
 *   processes = 4242:1024,4243:512       (pid:MiB of the processes using the GPU)
 *
 * Sections are numbered 0, 1, ... in order; every key has a default (see gpu_defaults).
 * Functions the emulator does not model answer NVML_ERROR_NOT_SUPPORTED.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "nvml_emulator.h"

#define EXPORT __attribute__((visibility("default")))
#define CONF_ENV "CLUSTER_CLI_NVML_EMULATOR_CONF"
#define CONF_DEFAULT "/etc/cluster-cli/nvml-emulator.conf"
#define MAX_GPUS 64
#define MAX_MIG 7 /* what nvmlDeviceGetMaxMigDeviceCount answers on A100/H100 */
#define MAX_PROCESSES 16
#define MAX_CPUS 4096
#define LONG_BITS (8 * sizeof(unsigned long))
#define MIN_GFX_CLOCK 210
#define GFX_CLOCK_STEP 15

typedef emu_return_t ret_t;
typedef emu_device_handle_t handle_t;

enum mig_state { MIG_UNSUPPORTED, MIG_OFF, MIG_ON };

struct emu_device {
    unsigned int index; /* GPU index, or MIG index under its parent */
    struct emu_device *parent; /* MIG devices only */
    char name[EMU_DEVICE_NAME_V2_BUFFER_SIZE];
    char uuid[EMU_DEVICE_UUID_V2_BUFFER_SIZE];
    emu_pci_info_t pci;
    unsigned int minor;
    unsigned long long memory_mib;
    unsigned long cpus[MAX_CPUS / LONG_BITS];
    int nvlink_peers[EMU_NVLINK_MAX_LINKS];
    unsigned int nvlinks;
    enum mig_state mig;
    unsigned int mig_devices, mig_slices;
    unsigned long long mig_memory_mib;
    unsigned int mem_clock, gfx_clock_max, app_mem_clock, app_gfx_clock;
    unsigned long long memory_used_mib, ecc_corrected, ecc_uncorrected;
    unsigned int utilization_gpu, utilization_memory, temperature_c, power_mw;
    emu_process_info_t processes[MAX_PROCESSES];
    unsigned int process_count;
};

/* roles/nvml_emulator tells its own library from a driver's by this string. */
EXPORT const char cluster_cli_nvml_emulator[] = "cluster-cli-nvml-emulator";

static struct emu_device gpus[MAX_GPUS];
static struct emu_device migs[MAX_GPUS][MAX_MIG];
static unsigned int gpu_count;
static int init_count;
static char driver_version[EMU_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
static char nvml_version[EMU_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];

static int fail(const char *path, int line, const char *what)
{
    fprintf(stderr, "nvml-emulator: %s:%d: %s\n", path, line, what);
    return -1;
}

static void copy(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src);
}

static int parse_pci(const char *s, emu_pci_info_t *pci)
{
    unsigned int domain, bus, dev, fn;

    if (sscanf(s, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4)
        return -1;
    pci->domain = domain;
    pci->bus = bus;
    pci->device = dev;
    snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.0", domain, bus, dev);
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0", domain, bus, dev);
    return 0;
}

/* "0-15,32-47" -> bit mask; empty -> no CPU */
static int parse_cpus(const char *s, unsigned long *mask)
{
    memset(mask, 0, sizeof(((struct emu_device *)0)->cpus));
    while (*s) {
        char *end;
        unsigned long lo = strtoul(s, &end, 10), hi = lo;

        if (end == s)
            return -1;
        if (*end == '-')
            hi = strtoul(end + 1, &end, 10);
        if (hi < lo || hi >= MAX_CPUS || (*end && *end != ','))
            return -1;
        for (unsigned long c = lo; c <= hi; c++)
            mask[c / LONG_BITS] |= 1UL << (c % LONG_BITS);
        s = *end ? end + 1 : end;
    }
    return 0;
}

static int parse_peers(const char *s, struct emu_device *gpu)
{
    gpu->nvlinks = 0;
    while (*s) {
        char *end;
        long peer = strtol(s, &end, 10);

        if (end == s || peer < 0 || gpu->nvlinks >= EMU_NVLINK_MAX_LINKS || (*end && *end != ','))
            return -1;
        gpu->nvlink_peers[gpu->nvlinks++] = (int)peer;
        s = *end ? end + 1 : end;
    }
    return 0;
}

static void gpu_defaults(struct emu_device *gpu, unsigned int index)
{
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    char cpus[32];

    memset(gpu, 0, sizeof(*gpu));
    gpu->index = index;
    copy(gpu->name, sizeof(gpu->name), "NVIDIA H100 80GB HBM3");
    snprintf(gpu->uuid, sizeof(gpu->uuid), "GPU-00000000-0000-4000-8000-%012x", index);
    snprintf(cpus, sizeof(cpus), "0-%ld", (ncpu > 0 ? ncpu : 1) - 1);
    parse_cpus(cpus, gpu->cpus);
    gpu->minor = index;
    gpu->memory_mib = 81559;
    gpu->pci.pciDeviceId = 0x233010DE;
    gpu->mig = MIG_OFF;
    gpu->mig_slices = 3;
    gpu->mig_memory_mib = 40448; /* named 40gb, as Slurm rounds it */
    gpu->mem_clock = gpu->app_mem_clock = 2619;
    gpu->gfx_clock_max = gpu->app_gfx_clock = 1980;
    gpu->temperature_c = 30;
    gpu->power_mw = 70000; /* an idle H100's draw */
    {
        char bus[32];

        snprintf(bus, sizeof(bus), "00000000:%02X:00.0", 0x18 + index);
        parse_pci(bus, &gpu->pci);
    }
}

static int set_mig(struct emu_device *gpu, const char *v)
{
    if (!strcmp(v, "on"))
        gpu->mig = MIG_ON;
    else if (!strcmp(v, "off"))
        gpu->mig = MIG_OFF;
    else if (!strcmp(v, "unsupported"))
        gpu->mig = MIG_UNSUPPORTED;
    else
        return -1;
    return 0;
}

static int set_uint(unsigned int *dst, const char *v)
{
    char *end;
    unsigned long n = strtoul(v, &end, 0);

    if (end == v || *end)
        return -1;
    *dst = (unsigned int)n;
    return 0;
}

static int set_ull(unsigned long long *dst, const char *v)
{
    char *end;
    unsigned long long n = strtoull(v, &end, 0);

    if (end == v || *end)
        return -1;
    *dst = n;
    return 0;
}

/* "pid:MiB,pid:MiB" */
static int parse_processes(const char *v, struct emu_device *gpu)
{
    const char *p = v;

    gpu->process_count = 0;
    while (*p) {
        char *end;
        unsigned long pid = strtoul(p, &end, 10);
        unsigned long long mib;

        if (end == p || *end != ':' || gpu->process_count == MAX_PROCESSES)
            return -1;
        p = end + 1;
        mib = strtoull(p, &end, 10);
        if (end == p || (*end && *end != ','))
            return -1;
        gpu->processes[gpu->process_count].pid = (unsigned int)pid;
        gpu->processes[gpu->process_count].usedGpuMemory = mib << 20;
        gpu->processes[gpu->process_count].gpuInstanceId = 0xFFFFFFFF; /* not MIG */
        gpu->processes[gpu->process_count].computeInstanceId = 0xFFFFFFFF;
        gpu->process_count++;
        p = *end ? end + 1 : end;
    }
    return 0;
}

static int set_gpu_key(struct emu_device *gpu, const char *k, const char *v)
{
    unsigned int n;

    if (!strcmp(k, "name"))
        copy(gpu->name, sizeof(gpu->name), v);
    else if (!strcmp(k, "uuid"))
        copy(gpu->uuid, sizeof(gpu->uuid), v);
    else if (!strcmp(k, "pci_bus_id"))
        return parse_pci(v, &gpu->pci);
    else if (!strcmp(k, "pci_device_id"))
        return set_uint(&gpu->pci.pciDeviceId, v);
    else if (!strcmp(k, "minor"))
        return set_uint(&gpu->minor, v);
    else if (!strcmp(k, "memory_mib")) {
        if (set_uint(&n, v))
            return -1;
        gpu->memory_mib = n;
    } else if (!strcmp(k, "mig_memory_mib")) {
        if (set_uint(&n, v))
            return -1;
        gpu->mig_memory_mib = n;
    } else if (!strcmp(k, "cpu_affinity"))
        return parse_cpus(v, gpu->cpus);
    else if (!strcmp(k, "nvlink_peers"))
        return parse_peers(v, gpu);
    else if (!strcmp(k, "mig"))
        return set_mig(gpu, v);
    else if (!strcmp(k, "mig_devices"))
        return set_uint(&gpu->mig_devices, v) || gpu->mig_devices > MAX_MIG ? -1 : 0;
    else if (!strcmp(k, "mig_slices"))
        return set_uint(&gpu->mig_slices, v);
    else if (!strcmp(k, "memory_used_mib"))
        return set_ull(&gpu->memory_used_mib, v);
    else if (!strcmp(k, "utilization_gpu"))
        return set_uint(&gpu->utilization_gpu, v) || gpu->utilization_gpu > 100 ? -1 : 0;
    else if (!strcmp(k, "utilization_memory"))
        return set_uint(&gpu->utilization_memory, v) || gpu->utilization_memory > 100 ? -1 : 0;
    else if (!strcmp(k, "temperature_c"))
        return set_uint(&gpu->temperature_c, v);
    else if (!strcmp(k, "power_mw"))
        return set_uint(&gpu->power_mw, v);
    else if (!strcmp(k, "ecc_corrected"))
        return set_ull(&gpu->ecc_corrected, v);
    else if (!strcmp(k, "ecc_uncorrected"))
        return set_ull(&gpu->ecc_uncorrected, v);
    else if (!strcmp(k, "processes"))
        return parse_processes(v, gpu);
    else
        return -1;
    return 0;
}

static int set_global_key(const char *k, const char *v)
{
    if (!strcmp(k, "driver_version"))
        copy(driver_version, sizeof(driver_version), v);
    else if (!strcmp(k, "nvml_version"))
        copy(nvml_version, sizeof(nvml_version), v);
    else
        return -1;
    return 0;
}

static char *trim(char *s)
{
    char *end;

    while (isspace((unsigned char)*s))
        s++;
    end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1]))
        *--end = '\0';
    return s;
}

static int parse_line(char *line, const char *path, int lineno)
{
    char *hash = strchr(line, '#'), *eq, *s;
    unsigned int index;

    if (hash)
        *hash = '\0';
    s = trim(line);
    if (!*s)
        return 0;
    if (sscanf(s, "[gpu %u]", &index) == 1) {
        if (index != gpu_count || gpu_count >= MAX_GPUS)
            return fail(path, lineno, "[gpu N] sections must be numbered 0, 1, ... in order (64 at most)");
        gpu_defaults(&gpus[gpu_count++], index);
        return 0;
    }
    if (!(eq = strchr(s, '=')))
        return fail(path, lineno, "expected key = value or [gpu N]");
    *eq = '\0';
    if (gpu_count ? set_gpu_key(&gpus[gpu_count - 1], trim(s), trim(eq + 1))
                  : set_global_key(trim(s), trim(eq + 1)))
        return fail(path, lineno, "unknown key or bad value");
    return 0;
}

static void make_migs(struct emu_device *gpu)
{
    for (unsigned int j = 0; j < gpu->mig_devices; j++) {
        struct emu_device *mig = &migs[gpu->index][j];

        *mig = *gpu;
        mig->index = j;
        mig->parent = gpu;
        mig->memory_mib = gpu->mig_memory_mib;
        snprintf(mig->name, sizeof(mig->name), "%s MIG %ug.%llugb", gpu->name, gpu->mig_slices,
                 (gpu->mig_memory_mib + 512) / 1024);
        snprintf(mig->uuid, sizeof(mig->uuid), "MIG-%08x-0000-4000-8000-%012x", gpu->index, j);
    }
}

static ret_t load_config(void)
{
    const char *path = getenv(CONF_ENV);
    char line[512];
    int lineno = 0, bad = 0;
    FILE *f;

    if (!path || !*path)
        path = CONF_DEFAULT;
    if (!(f = fopen(path, "r")))
        return EMU_ERROR_DRIVER_NOT_LOADED;
    gpu_count = 0;
    copy(driver_version, sizeof(driver_version), "535.261.03");
    copy(nvml_version, sizeof(nvml_version), "12.535.261.03");
    while (!bad && fgets(line, sizeof(line), f))
        bad = parse_line(line, path, ++lineno);
    fclose(f);
    if (bad) {
        gpu_count = 0;
        return EMU_ERROR_UNKNOWN;
    }
    for (unsigned int i = 0; i < gpu_count; i++)
        make_migs(&gpus[i]);
    return EMU_SUCCESS;
}

static int is_gpu(handle_t d)
{
    return d >= &gpus[0] && d < &gpus[gpu_count];
}

static int is_mig(handle_t d)
{
    const struct emu_device *first = &migs[0][0];

    return d >= first && d < first + MAX_GPUS * MAX_MIG && d->parent && is_gpu(d->parent) &&
           d->index < d->parent->mig_devices;
}

/* Every device call starts here: initialised, and a handle this library gave out. */
static ret_t check(handle_t d)
{
    if (!init_count)
        return EMU_ERROR_UNINITIALIZED;
    return is_gpu(d) || is_mig(d) ? EMU_SUCCESS : EMU_ERROR_INVALID_ARGUMENT;
}

/* A getter's checks: check(), somewhere to write the answer and, when kind is given, a device of
 * the kind the call is about. */
static ret_t check_out(handle_t d, const void *out, int (*kind)(handle_t))
{
    ret_t rc = check(d);

    if (rc)
        return rc;
    if (!out)
        return EMU_ERROR_INVALID_ARGUMENT;
    return kind && !kind(d) ? EMU_ERROR_NOT_SUPPORTED : EMU_SUCCESS;
}

static ret_t copy_out(char *dst, unsigned int size, const char *src)
{
    if (!dst)
        return EMU_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > size)
        return EMU_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return EMU_SUCCESS;
}

/* ---- init, system ---- */

EXPORT ret_t nvmlInit_v2(void)
{
    ret_t rc;

    if (init_count) {
        init_count++;
        return EMU_SUCCESS;
    }
    rc = load_config();
    if (rc == EMU_SUCCESS)
        init_count = 1;
    return rc;
}

EXPORT ret_t nvmlInit(void) { return nvmlInit_v2(); }
EXPORT ret_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return nvmlInit_v2(); }

EXPORT ret_t nvmlShutdown(void)
{
    if (!init_count)
        return EMU_ERROR_UNINITIALIZED;
    init_count--;
    return EMU_SUCCESS;
}

EXPORT const char *nvmlErrorString(ret_t rc)
{
    switch (rc) {
    case EMU_SUCCESS: return "Success";
    case EMU_ERROR_UNINITIALIZED: return "Uninitialized";
    case EMU_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case EMU_ERROR_NOT_SUPPORTED: return "Not Supported";
    case EMU_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case EMU_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case EMU_ERROR_NOT_FOUND: return "Not Found";
    case EMU_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case EMU_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case EMU_ERROR_NO_DATA: return "No data";
    default: return "Unknown Error";
    }
}

EXPORT ret_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    return init_count ? copy_out(version, length, driver_version) : EMU_ERROR_UNINITIALIZED;
}

EXPORT ret_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    return copy_out(version, length, nvml_version[0] ? nvml_version : "12.535.261.03");
}

EXPORT ret_t nvmlSystemGetCudaDriverVersion(int *version)
{
    if (!version)
        return EMU_ERROR_INVALID_ARGUMENT;
    *version = 12020;
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlSystemGetCudaDriverVersion_v2(int *version) { return nvmlSystemGetCudaDriverVersion(version); }

/* ---- enumeration ---- */

EXPORT ret_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (!init_count)
        return EMU_ERROR_UNINITIALIZED;
    if (!count)
        return EMU_ERROR_INVALID_ARGUMENT;
    *count = gpu_count;
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

EXPORT ret_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, handle_t *device)
{
    if (!init_count)
        return EMU_ERROR_UNINITIALIZED;
    if (index >= gpu_count || !device)
        return EMU_ERROR_INVALID_ARGUMENT;
    *device = &gpus[index];
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlDeviceGetHandleByIndex(unsigned int index, handle_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

static ret_t find_gpu(handle_t *device, int (*match)(const struct emu_device *, const char *),
                      const char *key)
{
    if (!init_count)
        return EMU_ERROR_UNINITIALIZED;
    if (!device || !key)
        return EMU_ERROR_INVALID_ARGUMENT;
    for (unsigned int i = 0; i < gpu_count; i++) {
        if (match(&gpus[i], key)) {
            *device = &gpus[i];
            return EMU_SUCCESS;
        }
    }
    return EMU_ERROR_NOT_FOUND;
}

static int uuid_is(const struct emu_device *d, const char *uuid) { return !strcmp(d->uuid, uuid); }

static int bus_is(const struct emu_device *d, const char *id)
{
    return !strcasecmp(d->pci.busId, id) || !strcasecmp(d->pci.busIdLegacy, id);
}

EXPORT ret_t nvmlDeviceGetHandleByUUID(const char *uuid, handle_t *device)
{
    return find_gpu(device, uuid_is, uuid);
}

EXPORT ret_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, handle_t *device)
{
    return find_gpu(device, bus_is, bus_id);
}

EXPORT ret_t nvmlDeviceGetIndex(handle_t d, unsigned int *index)
{
    ret_t rc = check(d);

    if (rc == EMU_SUCCESS && !is_gpu(d))
        return EMU_ERROR_NOT_SUPPORTED;
    if (rc == EMU_SUCCESS)
        *index = d->index;
    return rc;
}

/* ---- identity ---- */

EXPORT ret_t nvmlDeviceGetName(handle_t d, char *name, unsigned int length)
{
    ret_t rc = check(d);

    return rc ? rc : copy_out(name, length, d->name);
}

EXPORT ret_t nvmlDeviceGetUUID(handle_t d, char *uuid, unsigned int length)
{
    ret_t rc = check(d);

    return rc ? rc : copy_out(uuid, length, d->uuid);
}

EXPORT ret_t nvmlDeviceGetPciInfo_v3(handle_t d, emu_pci_info_t *pci)
{
    ret_t rc = check_out(d, pci, NULL);

    if (rc)
        return rc;
    *pci = d->pci;
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlDeviceGetPciInfo_v2(handle_t d, emu_pci_info_t *pci) { return nvmlDeviceGetPciInfo_v3(d, pci); }

/* The unversioned call fills NVML 1's smaller struct, which is not modelled. */
EXPORT ret_t nvmlDeviceGetPciInfo(handle_t d, void *pci)
{
    (void)d; (void)pci;
    return EMU_ERROR_NOT_SUPPORTED;
}

EXPORT ret_t nvmlDeviceGetMinorNumber(handle_t d, unsigned int *minor)
{
    ret_t rc = check_out(d, minor, is_gpu);

    if (rc)
        return rc;
    *minor = d->minor;
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlDeviceGetMemoryInfo(handle_t d, emu_memory_t *memory)
{
    ret_t rc = check_out(d, memory, NULL);

    if (rc)
        return rc;
    memory->total = d->memory_mib << 20;
    memory->used = d->memory_used_mib << 20;
    memory->free = memory->total > memory->used ? memory->total - memory->used : 0;
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlDeviceGetUtilizationRates(handle_t d, emu_utilization_t *utilization)
{
    ret_t rc = check_out(d, utilization, is_gpu);

    if (rc)
        return rc;
    utilization->gpu = d->utilization_gpu;
    utilization->memory = d->utilization_memory;
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlDeviceGetTemperature(handle_t d, int sensor, unsigned int *temperature)
{
    ret_t rc = check_out(d, temperature, is_gpu);

    if (rc)
        return rc;
    if (sensor != EMU_TEMPERATURE_GPU)
        return EMU_ERROR_INVALID_ARGUMENT;
    *temperature = d->temperature_c;
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlDeviceGetPowerUsage(handle_t d, unsigned int *milliwatts)
{
    ret_t rc = check_out(d, milliwatts, is_gpu);

    if (rc)
        return rc;
    *milliwatts = d->power_mw;
    return EMU_SUCCESS;
}

/* Volatile and aggregate counters answer the same: the emulator has no reboots to tell apart. */
EXPORT ret_t nvmlDeviceGetTotalEccErrors(handle_t d, int error_type, int counter_type, unsigned long long *count)
{
    ret_t rc = check_out(d, count, is_gpu);

    if (rc)
        return rc;
    if ((counter_type != EMU_VOLATILE_ECC && counter_type != EMU_AGGREGATE_ECC) ||
        (error_type != EMU_MEMORY_ERROR_TYPE_CORRECTED && error_type != EMU_MEMORY_ERROR_TYPE_UNCORRECTED))
        return EMU_ERROR_INVALID_ARGUMENT;
    *count = error_type == EMU_MEMORY_ERROR_TYPE_CORRECTED ? d->ecc_corrected : d->ecc_uncorrected;
    return EMU_SUCCESS;
}

/* As NVML: with too small a buffer (or none) the count needed and INSUFFICIENT_SIZE, or SUCCESS
 * and 0 when no process uses the GPU. */
EXPORT ret_t nvmlDeviceGetComputeRunningProcesses_v3(handle_t d, unsigned int *count, emu_process_info_t *infos)
{
    ret_t rc = check_out(d, count, is_gpu);

    if (rc)
        return rc;
    if (*count < d->process_count || (!infos && d->process_count)) {
        *count = d->process_count;
        return EMU_ERROR_INSUFFICIENT_SIZE;
    }
    *count = d->process_count;
    if (d->process_count)
        memcpy(infos, d->processes, d->process_count * sizeof(*infos));
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlDeviceGetCpuAffinity(handle_t d, unsigned int size, unsigned long *cpu_set)
{
    ret_t rc = check(d);
    unsigned int words = MAX_CPUS / LONG_BITS;

    if (rc)
        return rc;
    if (!cpu_set || !size)
        return EMU_ERROR_INVALID_ARGUMENT;
    memset(cpu_set, 0, size * sizeof(unsigned long));
    memcpy(cpu_set, d->cpus, (size < words ? size : words) * sizeof(unsigned long));
    return EMU_SUCCESS;
}

/* ---- NVLink: nvlink_peers lists, per active link, the index of the GPU at its other end ---- */

EXPORT ret_t nvmlDeviceGetNvLinkState(handle_t d, unsigned int link, emu_enable_state_t *active)
{
    ret_t rc = check(d);

    if (rc)
        return rc;
    if (!active || link >= EMU_NVLINK_MAX_LINKS)
        return EMU_ERROR_INVALID_ARGUMENT;
    if (!is_gpu(d) || !d->nvlinks)
        return EMU_ERROR_NOT_SUPPORTED;
    *active = link < d->nvlinks ? EMU_FEATURE_ENABLED : EMU_FEATURE_DISABLED;
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlDeviceGetNvLinkRemotePciInfo_v2(handle_t d, unsigned int link, emu_pci_info_t *pci)
{
    ret_t rc = check(d);
    unsigned int peer;

    if (rc)
        return rc;
    if (!pci || link >= EMU_NVLINK_MAX_LINKS)
        return EMU_ERROR_INVALID_ARGUMENT;
    if (!is_gpu(d) || link >= d->nvlinks)
        return EMU_ERROR_NOT_SUPPORTED;
    peer = (unsigned int)d->nvlink_peers[link];
    if (peer >= gpu_count)
        return EMU_ERROR_NOT_FOUND;
    *pci = gpus[peer].pci;
    return EMU_SUCCESS;
}

/* ---- MIG ---- */

EXPORT ret_t nvmlDeviceGetMigMode(handle_t d, unsigned int *current, unsigned int *pending)
{
    ret_t rc = check(d);

    if (rc)
        return rc;
    if (!current || !pending)
        return EMU_ERROR_INVALID_ARGUMENT;
    if (!is_gpu(d) || d->mig == MIG_UNSUPPORTED)
        return EMU_ERROR_NOT_SUPPORTED;
    *current = *pending = d->mig == MIG_ON ? EMU_DEVICE_MIG_ENABLE : EMU_DEVICE_MIG_DISABLE;
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlDeviceIsMigDeviceHandle(handle_t d, unsigned int *is_mig_device)
{
    ret_t rc = check_out(d, is_mig_device, NULL);

    if (rc)
        return rc;
    *is_mig_device = is_mig(d) ? 1 : 0;
    return EMU_SUCCESS;
}

static ret_t check_mig_parent(handle_t d)
{
    ret_t rc = check(d);

    if (rc)
        return rc;
    if (!is_gpu(d) || d->mig == MIG_UNSUPPORTED)
        return EMU_ERROR_NOT_SUPPORTED;
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlDeviceGetMaxMigDeviceCount(handle_t d, unsigned int *count)
{
    ret_t rc = check_mig_parent(d);

    if (rc)
        return rc;
    if (!count)
        return EMU_ERROR_INVALID_ARGUMENT;
    *count = MAX_MIG;
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlDeviceGetMigDeviceHandleByIndex(handle_t d, unsigned int index, handle_t *mig)
{
    ret_t rc = check_mig_parent(d);

    if (rc)
        return rc;
    if (!mig || index >= MAX_MIG)
        return EMU_ERROR_INVALID_ARGUMENT;
    if (d->mig != MIG_ON || index >= d->mig_devices)
        return EMU_ERROR_NOT_FOUND;
    *mig = &migs[d->index][index];
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle_t mig, handle_t *device)
{
    ret_t rc = check(mig);

    if (rc)
        return rc;
    if (!device || !is_mig(mig))
        return EMU_ERROR_INVALID_ARGUMENT;
    *device = mig->parent;
    return EMU_SUCCESS;
}

/* GPU instance j + 1, compute instance 0 (the ids nvidia-smi mig -cgi -C gives the first instances) */
EXPORT ret_t nvmlDeviceGetGpuInstanceId(handle_t d, unsigned int *id)
{
    ret_t rc = check_out(d, id, is_mig);

    if (rc)
        return rc;
    *id = d->index + 1;
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlDeviceGetComputeInstanceId(handle_t d, unsigned int *id)
{
    ret_t rc = check_out(d, id, is_mig);

    if (rc)
        return rc;
    *id = 0;
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlDeviceGetAttributes_v2(handle_t d, emu_device_attributes_t *attr)
{
    ret_t rc = check_out(d, attr, is_mig);

    if (rc)
        return rc;
    memset(attr, 0, sizeof(*attr));
    attr->multiprocessorCount = 16 * d->mig_slices;
    attr->gpuInstanceSliceCount = attr->computeInstanceSliceCount = d->mig_slices;
    attr->memorySizeMB = d->memory_mib;
    return EMU_SUCCESS;
}

/* ---- clocks: one memory clock, graphics clocks from the maximum down in 15 MHz steps ---- */

EXPORT ret_t nvmlDeviceGetSupportedMemoryClocks(handle_t d, unsigned int *count, unsigned int *clocks)
{
    ret_t rc = check_out(d, count, NULL);

    if (rc)
        return rc;
    if (*count < 1 || !clocks) {
        *count = 1;
        return EMU_ERROR_INSUFFICIENT_SIZE;
    }
    *count = 1;
    clocks[0] = d->mem_clock;
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlDeviceGetSupportedGraphicsClocks(handle_t d, unsigned int mem_clock,
                                                  unsigned int *count, unsigned int *clocks)
{
    ret_t rc = check(d);
    unsigned int n;

    if (rc)
        return rc;
    if (!count)
        return EMU_ERROR_INVALID_ARGUMENT;
    if (mem_clock != d->mem_clock)
        return EMU_ERROR_NOT_FOUND;
    n = (d->gfx_clock_max - MIN_GFX_CLOCK) / GFX_CLOCK_STEP + 1;
    if (*count < n || !clocks) {
        *count = n;
        return EMU_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int i = 0; i < n; i++)
        clocks[i] = d->gfx_clock_max - i * GFX_CLOCK_STEP;
    *count = n;
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlDeviceGetApplicationsClock(handle_t d, emu_clock_type_t type, unsigned int *clock)
{
    ret_t rc = check_out(d, clock, NULL);

    if (rc)
        return rc;
    if (type == EMU_CLOCK_MEM)
        *clock = d->app_mem_clock;
    else if (type == EMU_CLOCK_GRAPHICS || type == EMU_CLOCK_SM)
        *clock = d->app_gfx_clock;
    else
        return EMU_ERROR_NOT_SUPPORTED;
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlDeviceSetApplicationsClocks(handle_t d, unsigned int mem_clock, unsigned int gfx_clock)
{
    ret_t rc = check(d);

    if (rc)
        return rc;
    if (mem_clock != d->mem_clock || gfx_clock > d->gfx_clock_max || gfx_clock < MIN_GFX_CLOCK ||
        (d->gfx_clock_max - gfx_clock) % GFX_CLOCK_STEP)
        return EMU_ERROR_INVALID_ARGUMENT;
    d->app_mem_clock = mem_clock;
    d->app_gfx_clock = gfx_clock;
    return EMU_SUCCESS;
}

EXPORT ret_t nvmlDeviceResetApplicationsClocks(handle_t d)
{
    ret_t rc = check(d);

    if (rc)
        return rc;
    d->app_mem_clock = d->mem_clock;
    d->app_gfx_clock = d->gfx_clock_max;
    return EMU_SUCCESS;
}

/* ---- called by Slurm 24.11 (usage gathering), not modelled ---- */

EXPORT ret_t nvmlDeviceGetProcessUtilization(handle_t d, void *samples, unsigned int *count,
                                             unsigned long long last_seen)
{
    ret_t rc = check(d);

    (void)samples; (void)count; (void)last_seen;
    return rc ? rc : EMU_ERROR_NOT_SUPPORTED;
}
