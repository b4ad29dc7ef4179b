/*
 * Compiled (never run) by tests/nvml/test_emulator_build.py against NVIDIA's nvml.h: every type,
 * value and buffer size the emulator declares itself (nvml_emulator.h) must be nvml.h's.
 */
#include <stddef.h>
#include <nvml.h>
#include "nvml_emulator.h"

#define SAME(a, b) _Static_assert((long long)(a) == (long long)(b), #a " != " #b)
#define SAME_FIELD(emu, real, f) \
    SAME(offsetof(emu, f), offsetof(real, f)); SAME(sizeof(((emu *)0)->f), sizeof(((real *)0)->f))

SAME(EMU_SUCCESS, NVML_SUCCESS);
SAME(EMU_ERROR_UNINITIALIZED, NVML_ERROR_UNINITIALIZED);
SAME(EMU_ERROR_INVALID_ARGUMENT, NVML_ERROR_INVALID_ARGUMENT);
SAME(EMU_ERROR_NOT_SUPPORTED, NVML_ERROR_NOT_SUPPORTED);
SAME(EMU_ERROR_NO_PERMISSION, NVML_ERROR_NO_PERMISSION);
SAME(EMU_ERROR_ALREADY_INITIALIZED, NVML_ERROR_ALREADY_INITIALIZED);
SAME(EMU_ERROR_NOT_FOUND, NVML_ERROR_NOT_FOUND);
SAME(EMU_ERROR_INSUFFICIENT_SIZE, NVML_ERROR_INSUFFICIENT_SIZE);
SAME(EMU_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_DRIVER_NOT_LOADED);
SAME(EMU_ERROR_NO_DATA, NVML_ERROR_NO_DATA);
SAME(EMU_ERROR_UNKNOWN, NVML_ERROR_UNKNOWN);
SAME(sizeof(emu_return_t), sizeof(nvmlReturn_t));

SAME(EMU_FEATURE_DISABLED, NVML_FEATURE_DISABLED);
SAME(EMU_FEATURE_ENABLED, NVML_FEATURE_ENABLED);
SAME(sizeof(emu_enable_state_t), sizeof(nvmlEnableState_t));
SAME(EMU_CLOCK_GRAPHICS, NVML_CLOCK_GRAPHICS);
SAME(EMU_CLOCK_SM, NVML_CLOCK_SM);
SAME(EMU_CLOCK_MEM, NVML_CLOCK_MEM);
SAME(EMU_CLOCK_VIDEO, NVML_CLOCK_VIDEO);
SAME(sizeof(emu_clock_type_t), sizeof(nvmlClockType_t));

SAME(EMU_DEVICE_PCI_BUS_ID_BUFFER_SIZE, NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE);
SAME(EMU_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE, NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE);
SAME(EMU_DEVICE_UUID_BUFFER_SIZE, NVML_DEVICE_UUID_BUFFER_SIZE);
SAME(EMU_DEVICE_UUID_V2_BUFFER_SIZE, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
SAME(EMU_DEVICE_NAME_BUFFER_SIZE, NVML_DEVICE_NAME_BUFFER_SIZE);
SAME(EMU_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_NAME_V2_BUFFER_SIZE);
SAME(EMU_SYSTEM_DRIVER_VERSION_BUFFER_SIZE, NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE);
SAME(EMU_NVLINK_MAX_LINKS, NVML_NVLINK_MAX_LINKS);
SAME(EMU_DEVICE_MIG_DISABLE, NVML_DEVICE_MIG_DISABLE);
SAME(EMU_DEVICE_MIG_ENABLE, NVML_DEVICE_MIG_ENABLE);

SAME(sizeof(emu_pci_info_t), sizeof(nvmlPciInfo_t));
SAME_FIELD(emu_pci_info_t, nvmlPciInfo_t, busIdLegacy);
SAME_FIELD(emu_pci_info_t, nvmlPciInfo_t, domain);
SAME_FIELD(emu_pci_info_t, nvmlPciInfo_t, bus);
SAME_FIELD(emu_pci_info_t, nvmlPciInfo_t, device);
SAME_FIELD(emu_pci_info_t, nvmlPciInfo_t, pciDeviceId);
SAME_FIELD(emu_pci_info_t, nvmlPciInfo_t, pciSubSystemId);
SAME_FIELD(emu_pci_info_t, nvmlPciInfo_t, busId);

SAME(sizeof(emu_device_attributes_t), sizeof(nvmlDeviceAttributes_t));
SAME_FIELD(emu_device_attributes_t, nvmlDeviceAttributes_t, multiprocessorCount);
SAME_FIELD(emu_device_attributes_t, nvmlDeviceAttributes_t, sharedCopyEngineCount);
SAME_FIELD(emu_device_attributes_t, nvmlDeviceAttributes_t, sharedDecoderCount);
SAME_FIELD(emu_device_attributes_t, nvmlDeviceAttributes_t, sharedEncoderCount);
SAME_FIELD(emu_device_attributes_t, nvmlDeviceAttributes_t, sharedJpegCount);
SAME_FIELD(emu_device_attributes_t, nvmlDeviceAttributes_t, sharedOfaCount);
SAME_FIELD(emu_device_attributes_t, nvmlDeviceAttributes_t, gpuInstanceSliceCount);
SAME_FIELD(emu_device_attributes_t, nvmlDeviceAttributes_t, computeInstanceSliceCount);
SAME_FIELD(emu_device_attributes_t, nvmlDeviceAttributes_t, memorySizeMB);

SAME(sizeof(emu_memory_t), sizeof(nvmlMemory_t));
SAME_FIELD(emu_memory_t, nvmlMemory_t, total);
SAME_FIELD(emu_memory_t, nvmlMemory_t, free);
SAME_FIELD(emu_memory_t, nvmlMemory_t, used);

SAME(sizeof(emu_device_handle_t), sizeof(nvmlDevice_t));

SAME(sizeof(emu_utilization_t), sizeof(nvmlUtilization_t));
SAME_FIELD(emu_utilization_t, nvmlUtilization_t, gpu);
SAME_FIELD(emu_utilization_t, nvmlUtilization_t, memory);
SAME(sizeof(emu_process_info_t), sizeof(nvmlProcessInfo_t));
SAME_FIELD(emu_process_info_t, nvmlProcessInfo_t, pid);
SAME_FIELD(emu_process_info_t, nvmlProcessInfo_t, usedGpuMemory);
SAME_FIELD(emu_process_info_t, nvmlProcessInfo_t, gpuInstanceId);
SAME_FIELD(emu_process_info_t, nvmlProcessInfo_t, computeInstanceId);
SAME(EMU_TEMPERATURE_GPU, NVML_TEMPERATURE_GPU);
SAME(EMU_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_CORRECTED);
SAME(EMU_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED);
SAME(EMU_VOLATILE_ECC, NVML_VOLATILE_ECC);
SAME(EMU_AGGREGATE_ECC, NVML_AGGREGATE_ECC);
