# `cmake --install BUILD [--prefix P]` and `cpack -G DEB` (docs/install.md): headers under
# include/ckpt/, the static libraries, the `ckpt` executable, and a CMake package config so that
# another project does
#   find_package(ckpt CONFIG REQUIRED)       # COMPONENTS torch to require the libtorch adapter
#   target_link_libraries(app PRIVATE ckpt::ckpt)    # the core: format, io, h5, store, loader, sched
#   target_link_libraries(app PRIVATE ckpt::torch)   # + the libtorch adapter and the Checkpointer
# Two export sets: ckptTargets (no libtorch) and ckptTorchTargets (loaded by the config only when
# libtorch is found, since its link interface names torch's own imported targets).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(CKPT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ckpt)

set(CKPT_CORE_LIBS ckpt_base ckpt_format ckpt_io ckpt_location ckpt_h5 ckpt_box ckpt_store ckpt_loader ckpt_sched)
foreach(lib ckpt_s3_sign ckpt_s3_client ckpt_s3_env)
  if(TARGET ${lib})
    list(APPEND CKPT_CORE_LIBS ${lib})
  endif()
endforeach()
add_library(ckpt_pkg_core INTERFACE)
target_link_libraries(ckpt_pkg_core INTERFACE ckpt_store ckpt_loader ckpt_sched)
set_target_properties(ckpt_pkg_core PROPERTIES EXPORT_NAME ckpt)
add_library(ckpt::ckpt ALIAS ckpt_pkg_core)
install(TARGETS ${CKPT_CORE_LIBS} ckpt_pkg_core EXPORT ckptTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT ckptTargets NAMESPACE ckpt:: DESTINATION ${CKPT_CMAKE_DIR})

set(CKPT_HEADER_EXCLUDES PATTERN dist EXCLUDE)
if(TARGET ckpt_train)
  add_library(ckpt_pkg_torch INTERFACE)
  target_link_libraries(ckpt_pkg_torch INTERFACE ckpt_train ckpt_torch)
  set_target_properties(ckpt_pkg_torch PROPERTIES EXPORT_NAME torch)
  add_library(ckpt::torch ALIAS ckpt_pkg_torch)
  # ckpt_resume: the Checkpointer restores through the pipeline (its headers stay internal).
  install(TARGETS ckpt_torch ckpt_resume ckpt_reshard ckpt_shard_read ckpt_train ckpt_pkg_torch
          EXPORT ckptTorchTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT ckptTorchTargets NAMESPACE ckpt:: DESTINATION ${CKPT_CMAKE_DIR})
  # train/ (the Checkpointer, a top-level folder above resume/ in the tree) installs under the
  # package's one include folder: #include "ckpt/train/checkpointer.h", as before the move.
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/train/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ckpt/train
          FILES_MATCHING PATTERN "*.h")
else()
  list(APPEND CKPT_HEADER_EXCLUDES PATTERN torch EXCLUDE)
endif()
# The core's headers keep their paths (#include "ckpt/store/rank_io.h"); ckpt/dist is internal.
install(DIRECTORY ${CMAKE_SOURCE_DIR}/ckpt/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ckpt
        FILES_MATCHING PATTERN "*.h" ${CKPT_HEADER_EXCLUDES})
if(TARGET ckpt)
  # As built: its RUNPATH names only system folders (HDF5's, CUDA's), none in the build tree, and
  # install(TARGETS)'s RPATH rewrite trips over the trailing ':' the linker line carries.
  install(PROGRAMS $<TARGET_FILE:ckpt> DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/ckptConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/ckptConfig.cmake
                              INSTALL_DESTINATION ${CKPT_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/ckptConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/ckptConfig.cmake ${CMAKE_BINARY_DIR}/ckptConfigVersion.cmake
        DESTINATION ${CKPT_CMAKE_DIR})

# cpack -G DEB --config BUILD/CPackConfig.cmake: one .deb with all of the above. The headers and
# static libraries need the dev packages of what they link (the executable's shared libraries are
# found by dpkg-shlibdeps when dpkg-dev is installed).
set(CPACK_PACKAGE_NAME ckpt)
set(CPACK_PACKAGE_VENDOR "ckpt")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Complete, verified, bit-exact training checkpoints: C++ library, CMake package and CLI")
set(CPACK_PACKAGE_CONTACT "ckpt maintainers <ckpt@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libhdf5-dev, libxxhash-dev, nlohmann-json3-dev")
if(TARGET ckpt_train)
  set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libtorch-dev")
endif()
find_program(CKPT_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(CKPT_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
endif()
set(CPACK_GENERATOR DEB)
include(CPack)
