# `cmake --install BUILD --prefix PREFIX` (issue 9): the calico binary in PREFIX/bin, the public headers in
# PREFIX/include/calico, the static libraries in PREFIX/lib, data/ and the plotting scripts in
# PREFIX/share/calico, and an exported calicoConfig.cmake (find_package(calico): targets calico::core,
# calico::reference, calico::harness, calico::simulator, calico::megakernel) in PREFIX/lib/cmake/calico.
# The installed binary finds PREFIX/share/calico/data by itself (calico::data_dir()).
include(CMakePackageConfigHelpers)
set(CALICO_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/calico)
install(TARGETS calico_core calico_reference calico_harness calico_simulator calico_megakernel calico
        EXPORT calicoTargets
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(part core reference harness simulator megakernel)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${part}/include/calico DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/data/ DESTINATION ${CMAKE_INSTALL_DATADIR}/calico/data
        PATTERN "*.py" EXCLUDE)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/plot_report.py ${PROJECT_SOURCE_DIR}/scripts/plot_sweep.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/calico/scripts)
install(EXPORT calicoTargets NAMESPACE calico:: DESTINATION ${CALICO_INSTALL_CMAKEDIR})
set(CALICO_CONFIG_MPI OFF)
if(MPI_CXX_FOUND)
  set(CALICO_CONFIG_MPI ON)
endif()
set(CALICO_CONFIG_CUDA OFF)
if(CALICO_HAVE_CUDA)
  set(CALICO_CONFIG_CUDA ON)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/calicoConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/calicoConfig.cmake INSTALL_DESTINATION ${CALICO_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/calicoConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/calicoConfig.cmake ${PROJECT_BINARY_DIR}/calicoConfigVersion.cmake
        DESTINATION ${CALICO_INSTALL_CMAKEDIR})
