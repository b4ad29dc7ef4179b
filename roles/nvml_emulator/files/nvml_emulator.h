/*
 * The NVML types the emulator needs, declared here under EMU_ names (nvml.h is NVIDIA's and is not
 * kept in this repository). Values and layouts are those of nvml.h (libnvidia-ml-dev
 * 11.8.86, NVML_API_VERSION 11); tests/nvml/layout_check.c compiles against the real header and
 * fails the build if one of them differs.
 */
#ifndef NVML_EMULATOR_H
#define NVML_EMULATOR_H

typedef enum {
    EMU_SUCCESS = 0,
    EMU_ERROR_UNINITIALIZED = 1,
    EMU_ERROR_INVALID_ARGUMENT = 2,
    EMU_ERROR_NOT_SUPPORTED = 3,
    EMU_ERROR_NO_PERMISSION = 4,
    EMU_ERROR_ALREADY_INITIALIZED = 5,
    EMU_ERROR_NOT_FOUND = 6,
    EMU_ERROR_INSUFFICIENT_SIZE = 7,
    EMU_ERROR_DRIVER_NOT_LOADED = 9,
    EMU_ERROR_NO_DATA = 21,
    EMU_ERROR_UNKNOWN = 999
} emu_return_t;

typedef enum {
    EMU_FEATURE_DISABLED = 0,
    EMU_FEATURE_ENABLED = 1
} emu_enable_state_t;

typedef enum {
    EMU_CLOCK_GRAPHICS = 0,
    EMU_CLOCK_SM = 1,
    EMU_CLOCK_MEM = 2,
    EMU_CLOCK_VIDEO = 3
} emu_clock_type_t;

#define EMU_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define EMU_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define EMU_DEVICE_UUID_BUFFER_SIZE 80
#define EMU_DEVICE_UUID_V2_BUFFER_SIZE 96
#define EMU_DEVICE_NAME_BUFFER_SIZE 64
#define EMU_DEVICE_NAME_V2_BUFFER_SIZE 96
#define EMU_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define EMU_NVLINK_MAX_LINKS 18
#define EMU_DEVICE_MIG_DISABLE 0
#define EMU_DEVICE_MIG_ENABLE 1

/* nvmlPciInfo_t (the layout of nvmlDeviceGetPciInfo_v2/_v3) */
typedef struct {
    char busIdLegacy[EMU_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[EMU_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} emu_pci_info_t;

/* nvmlDeviceAttributes_t (nvmlDeviceGetAttributes_v2) */
typedef struct {
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    unsigned int gpuInstanceSliceCount;
    unsigned int computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} emu_device_attributes_t;

/* nvmlMemory_t (nvmlDeviceGetMemoryInfo) */
typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} emu_memory_t;

/* nvmlUtilization_t (nvmlDeviceGetUtilizationRates): percent of the last sample period */
typedef struct {
    unsigned int gpu;
    unsigned int memory;
} emu_utilization_t;

/* nvmlProcessInfo_t (nvmlDeviceGetComputeRunningProcesses_v3) */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} emu_process_info_t;

#define EMU_TEMPERATURE_GPU 0
#define EMU_MEMORY_ERROR_TYPE_CORRECTED 0
#define EMU_MEMORY_ERROR_TYPE_UNCORRECTED 1
#define EMU_VOLATILE_ECC 0
#define EMU_AGGREGATE_ECC 1

/* nvmlDevice_t is an opaque pointer; the emulator's handles point at these. */
typedef struct emu_device *emu_device_handle_t;

#endif
