# check's tests (label check), included from tests/CMakeLists.txt so that
# mt_add_test is in scope. CPU tests run everywhere; the GPU suite skips (77)
# without an NVIDIA driver and GPU.
mt_add_test(test_check_vmap SOURCES test_check_vmap.c LABELS check)
mt_add_test(test_check_gpu SOURCES test_check_gpu.c LABELS check)
target_link_libraries(test_check_gpu PRIVATE mt_check_cuda)
set_tests_properties(test_check_gpu PROPERTIES SKIP_RETURN_CODE 77)
mt_add_test(test_check_fatbin SOURCES test_check_fatbin.c LABELS check
            ARGS ${CMAKE_CURRENT_SOURCE_DIR}/check)

# The interposer end to end on a fake driver (no GPU needed).
add_library(mt_fake_cuda SHARED check/fake_cuda.c)
target_link_libraries(mt_fake_cuda PRIVATE memtrack_static Threads::Threads)
# The entry points are the driver ABI, defined without a header of their own.
target_compile_options(mt_fake_cuda PRIVATE -Wno-missing-prototypes)
set_target_properties(mt_fake_cuda PROPERTIES OUTPUT_NAME cuda SUFFIX ".so.1" NO_SONAME ON
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/fakecuda)
add_executable(mt_check_fake_app check/fake_app.c)
target_link_libraries(mt_check_fake_app PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)
add_executable(mt_check_fake_app_linked check/fake_app.c $<TARGET_OBJECTS:mt_check_rt>)
target_compile_definitions(mt_check_fake_app_linked PRIVATE FAKE_APP_LINKED)
target_link_libraries(mt_check_fake_app_linked PRIVATE mt_check_cuda ${CMAKE_DL_LIBS})
add_test(NAME test_check_preload COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check/preload_test.sh ${CMAKE_BINARY_DIR})
set_tests_properties(test_check_preload PROPERTIES LABELS check TIMEOUT 120 SKIP_RETURN_CODE 77
  ENVIRONMENT "MT_SANITIZE=${MT_SANITIZE}")
add_dependencies(mt_check_fake_app mt_fake_cuda memtrack_check memtrack_cli mt_check_fake_app_linked)
mt_add_test(test_check_ptx SOURCES test_check_ptx.c LABELS check ARGS ${CMAKE_CURRENT_SOURCE_DIR}/check)
mt_add_test(test_check_report SOURCES test_check_report.c LABELS check)
